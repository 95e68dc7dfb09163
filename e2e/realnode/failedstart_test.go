//go:build testbed

package realnode

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/wrap"
)

// TestFailedStartThenCutOff (issue 34): a driver's first start fails in wrap with 125 — self-fencing
// is on and its heartbeat Lease is refused, since the admin has not yet bound the heartbeat role to
// the drivers' own ServiceAccount, which may do what a Spark driver does and no more — and the
// kubelet's next start, once the role is bound, runs the driver. That failed start is no
// exit of the driver: driverset neither counts a restart nor deletes the running driver. Then the
// driver's node is cut off: the new incarnation's driver process starts only after the old one's
// has ended (wrap's self-fence), as the host's process table shows, never beside it.
func TestFailedStartThenCutOff(t *testing.T) {
	const T = 15 * time.Second
	ctx := context.Background()
	ns := namespace(t, nil)
	const sa = "spark"
	sparkServiceAccount(t, ns, sa)
	a := simApp(ns, "failedstart", 1)
	a.ServiceAccount = sa
	a.DriverAnnotations = map[string]string{contract.AnnotationSelfFence: T.String()}
	s := submit(t, a, nil)

	// The real kubelet reports wrap's failed start.
	var first *corev1.Pod
	waitFor(t, 3*time.Minute, "wrap's failed start in "+s.names.DriverPodName(), func(ctx context.Context) (bool, error) {
		p, err := kube().CoreV1().Pods(ns).Get(ctx, s.names.DriverPodName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		first = p
		return failedStartIn(p) != "", nil
	})
	t.Logf("the kubelet reports: %s", failedStartIn(first))
	waitFor(t, time.Minute, "the placeholder to say why the driver did not start", func(ctx context.Context) (bool, error) {
		p, err := kube().CoreV1().Pods(ns).Get(ctx, s.plan.DriverPodName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return strings.Contains(p.Status.Message, "the driver did not start, the kubelet tries again"), nil
	})

	bindHeartbeat(t, ns, sa)
	running := runningDriver(t, s, "", 3*time.Minute)
	waitLog(t, ns, running.Name, "registered from", 1, 2*time.Minute)
	if running.UID != first.UID {
		t.Fatalf("S-0 was replaced (%s, then %s): the failed start was taken for the driver's exit", first.UID, running.UID)
	}
	node := running.Spec.NodeName
	if len(appDrivers(t, node, ns)) != 1 {
		t.Fatalf("want the driver's process on %s, got %+v", node, processes(t, node))
	}
	// driverset has seen the running driver with the failed start in lastState: give it a few
	// passes, then nothing may have been counted or deleted.
	time.Sleep(5 * time.Second)
	p, err := kube().CoreV1().Pods(ns).Get(ctx, s.plan.DriverPodName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := p.Annotations[contract.AnnotationRestarts]; n != "" && n != "0" {
		t.Errorf("restarts recorded on the placeholder = %q after a failed start, want none", n)
	}
	evs, err := kube().CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": s.plan.DriverPodName, "reason": "Restarting"}.String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		t.Errorf("Event Restarting after a failed start: %s", e.Message)
	}
	if d, err := kube().CoreV1().Pods(ns).Get(ctx, s.names.DriverPodName(), metav1.GetOptions{}); err != nil || d.UID != first.UID || d.DeletionTimestamp != nil {
		t.Fatalf("the running driver was deleted or replaced after a failed start (%v)", err)
	}

	w := watchDrivers(t, ns, node)
	if err := bed.cluster.PartitionNode(node); err != nil {
		t.Fatal(err)
	}
	healed := false
	t.Cleanup(func() {
		if !healed {
			_ = bed.cluster.HealNode(node)
		}
	})
	second := runningDriver(t, s, string(first.UID), 3*time.Minute)
	if second.Spec.NodeName == node {
		t.Fatalf("the new driver runs on the cut-off node %s", node)
	}
	waitFor(t, 30*time.Second, "the new driver's process on "+second.Spec.NodeName, func(context.Context) (bool, error) {
		return !w.started().IsZero(), nil
	})
	oldExit, newStart, overlap := w.stop()
	if oldExit.IsZero() || overlap || !newStart.After(oldExit) {
		t.Errorf("the new driver process started (%s) while the old one ran (ended %s, overlap %v)",
			newStart.Format(time.StampMilli), oldExit.Format(time.StampMilli), overlap)
	}
	t.Logf("cut off %s: old driver process gone at %s, new one on %s at %s", node,
		oldExit.Format(time.StampMilli), second.Spec.NodeName, newStart.Format(time.StampMilli))

	if err := bed.cluster.HealNode(node); err != nil {
		t.Fatal(err)
	}
	healed = true
	waitLog(t, ns, second.Name, "registered from", 1, 2*time.Minute)
	s.end(t, "0")
	if res := s.Wait(t, 2*time.Minute); res.FinalPhase != corev1.PodSucceeded {
		t.Errorf("spark-submit saw %s (phases %v), want Succeeded", res.FinalPhase, res.Phases)
	}
}

// failedStartIn is the termination message of wrap's start that did not start the driver, in
// either of the driver container's last two terminations, "" when neither is one.
func failedStartIn(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != contract.DriverContainerName {
			continue
		}
		for _, term := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if term != nil && wrap.DriverNotStarted(term.Message) {
				return term.Message
			}
		}
	}
	return ""
}

// sparkServiceAccount makes ServiceAccount sa in ns with what a Spark driver needs of the API (its
// executor pods, their ConfigMaps, Services and claims) and nothing else: no Leases.
func sparkServiceAccount(t *testing.T, ns, sa string) {
	t.Helper()
	ctx := context.Background()
	if _, err := kube().CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: sa},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "configmaps", "services", "persistentvolumeclaims"}, Verbs: []string{"*"}}},
	}
	if _, err := kube().RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: sa},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}},
	}
	if _, err := kube().RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
