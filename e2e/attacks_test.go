//go:build testbed

package e2e

import (
	"context"
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

// tenant is a client acting as a user with only the namespace's `edit` role in ns: what a tenant
// of a shared cluster has.
func tenant(t *testing.T, ns string) kubernetes.Interface {
	t.Helper()
	return editor(t, ns, "tenant-of-"+ns, "tenant")
}

// editor is a client acting as user, given the namespace's `edit` role in ns by the RoleBinding
// binding.
func editor(t *testing.T, ns, user, binding string) kubernetes.Interface {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: binding, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := kube().RbacV1().RoleBindings(ns).Create(context.Background(), rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(bed.cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The apiserver's RBAC authorizer learns of the binding from its watch, a moment after the
	// create (a tenant's first create was once refused "cannot create resource pods" under load).
	waitFor(t, 30*time.Second, "the tenant's edit binding in force", func(ctx context.Context) (bool, error) {
		return allowed(ctx, c, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "pods"}), nil
	})
	return c
}

// allowed reports whether c's user may do attrs, as the apiserver's authorizer answers now: a
// binding just created is in force only once the authorizer's watch has brought it.
func allowed(ctx context.Context, c kubernetes.Interface, attrs authorizationv1.ResourceAttributes) bool {
	r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs},
	}, metav1.CreateOptions{})
	return err == nil && r.Status.Allowed
}

// Attack: a tenant deletes the placeholder with --cascade=orphan. The garbage collector then
// leaves the StatefulSet, with no owner, to run the driver (and make it again after a node loss)
// for good. driverset scales such a StatefulSet to 0: nothing of the app keeps running.
func TestOrphanCascadeLeavesNothingRunning(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	c := tenant(t, ns)
	r := startApp(t, app(ns, "orphan"), 1)
	orphan := metav1.DeletePropagationOrphan
	if err := c.CoreV1().Pods(ns).Delete(ctx, r.sub.plan.DriverPodName, metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
		t.Fatalf("the tenant could not delete the placeholder with --cascade=orphan: %v", err)
	}
	waitFor(t, 60*time.Second, "the orphaned StatefulSet stopped and its driver pod gone", func(ctx context.Context) (bool, error) {
		s, err := kube().AppsV1().StatefulSets(ns).Get(ctx, r.names.StatefulSet, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if metav1.GetControllerOf(s) != nil || s.Spec.Replicas == nil || *s.Spec.Replicas != 0 {
			return false, nil
		}
		_, err = kube().CoreV1().Pods(ns).Get(ctx, r.names.DriverPodName(), metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// The executors went with the driver pod that owns them.
	waitFor(t, 60*time.Second, "no executor left", func(ctx context.Context) (bool, error) {
		pods, err := kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "spark-role=executor"})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				running++
			}
		}
		return running == 0, nil
	})
}
