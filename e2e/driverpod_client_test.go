//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Extra keys the apiserver puts in the user info of a ServiceAccount token bound to a pod (every
// projected token a kubelet mounts is): the policy driverset-heartbeat reads them.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// asPod is a client acting as pod's own ServiceAccount token, as `driverset wrap` renews the
// heartbeat with it: the ServiceAccount's user and groups, and the pod's name and UID as the
// token's extra. KWOK pods run no container, so the test speaks for them; real nodes' drivers
// use their real tokens (e2e/realnode). The ServiceAccount is granted driverset-heartbeat in the
// pod's namespace, as the README tells an admin to do for self-fencing drivers.
func asPod(t testing.TB, pod *corev1.Pod) kubernetes.Interface {
	t.Helper()
	c, err := podClient(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// podClient is asPod for a goroutine that is not the test's.
func podClient(ctx context.Context, pod *corev1.Pod) (kubernetes.Interface, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	user := fmt.Sprintf("system:serviceaccount:%s:%s", pod.Namespace, sa)
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "driverset-heartbeat-" + sa, Namespace: pod.Namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "driverset-heartbeat"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: pod.Namespace}},
	}
	if _, err := kube().RbacV1().RoleBindings(pod.Namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	cfg := rest.CopyConfig(bed.cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: user,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + pod.Namespace, "system:authenticated"},
		Extra:    map[string][]string{extraPodName: {pod.Name}, extraPodUID: {string(pod.UID)}},
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// The apiserver's RBAC authorizer learns of the binding from its watch, a moment later.
	deadline := time.Now().Add(30 * time.Second)
	for !allowed(ctx, c, authorizationv1.ResourceAttributes{Namespace: pod.Namespace, Verb: "update", Group: "coordination.k8s.io", Resource: "leases"}) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("%s may not update Leases 30 s after its driverset-heartbeat binding", user)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return c, nil
}
