//go:build testbed

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
)

// TestStatefulSetOfAnotherNameIsFoundByItsController: an app whose StatefulSet another build of
// driverset made under another name (a rollback across a naming change; issue 34). With driverset
// down, the app's S is replaced by the same StatefulSet under a third name; driverset, started
// again, keeps it (no second StatefulSet under this build's name), makes its headless Service
// (deleted with the first S's) under the name that goes with it, and `kubectl driverset status`
// and `list` show it and its pod. Before, driverset-guard-creates refused that Service, named for
// no StatefulSet this build computes from the placeholder's name: the app waited for good.
func TestStatefulSetOfAnotherNameIsFoundByItsController(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	s := submit(t, app(ns, "renamed"))
	p := s.plan.DriverPodName
	names := contract.NamesFor(p)
	first := runningDriver(t, ns, names, "")
	sts := getStatefulSet(t, ns, names.StatefulSet)

	restart := stopSharedDriverset(t)
	other := contract.NamesOfStatefulSet("renamed-by-another-build")
	renamed := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: other.StatefulSet, Namespace: ns, Labels: sts.Labels,
			Annotations: sts.Annotations, OwnerReferences: sts.OwnerReferences},
		Spec: *sts.Spec.DeepCopy(),
	}
	renamed.Labels[contract.LabelDriver] = other.StatefulSet
	renamed.Spec.Selector.MatchLabels[contract.LabelDriver] = other.StatefulSet
	renamed.Spec.Template.Labels[contract.LabelDriver] = other.StatefulSet
	renamed.Spec.ServiceName = other.Service
	// The first S goes, and its pod with it (driverset's finalizer taken off by hand: it is down).
	if err := kube().AppsV1().StatefulSets(ns).Delete(ctx, sts.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the first S-0 deleted and released", func(ctx context.Context) (bool, error) {
		d, err := kube().CoreV1().Pods(ns).Get(ctx, names.DriverPodName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) || err == nil && d.UID != first.UID:
			return true, nil
		case err != nil || d.DeletionTimestamp == nil:
			return false, err
		}
		_, err = kube().CoreV1().Pods(ns).Patch(ctx, d.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		return false, client404(err)
	})
	if _, err := kube().AppsV1().StatefulSets(ns).Create(ctx, renamed, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Its Service is left for driverset to make, under the name that goes with that StatefulSet
	// (contract.NamesOfStatefulSet): the creates webhook and driverset-guard-creates must admit it.
	if err := kube().CoreV1().Services(ns).Delete(ctx, names.Service, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	restart()

	var last string
	defer func() {
		if t.Failed() {
			t.Logf("the placeholder's last message: %q", last)
			if ph, err := kube().CoreV1().Pods(ns).Get(ctx, p, metav1.GetOptions{}); err == nil {
				t.Logf("the placeholder's message now: %q", ph.Status.Message)
			}
		}
	}()
	second := runningDriver(t, ns, other, "")
	// driverset made H under the name S-0's subdomain has (S's serviceName), owned by P.
	var made *corev1.Service
	waitFor(t, time.Minute, "Service "+other.Service+" made by driverset", func(ctx context.Context) (bool, error) {
		if ph, err := kube().CoreV1().Pods(ns).Get(ctx, p, metav1.GetOptions{}); err == nil {
			last = ph.Status.Message
		}
		svc, err := kube().CoreV1().Services(ns).Get(ctx, other.Service, metav1.GetOptions{})
		made = svc
		return err == nil, client404(err)
	})
	if !ownedBy(made, getPod(t, ns, p)) || made.Spec.Selector[contract.LabelDriver] != other.StatefulSet {
		t.Errorf("Service %s: owners %v, selector %v; want the placeholder's, selecting %s", made.Name, made.OwnerReferences, made.Spec.Selector, other.StatefulSet)
	}
	if second.Spec.Subdomain != other.Service {
		t.Errorf("S-0's subdomain %q, want %s", second.Spec.Subdomain, other.Service)
	}
	// Passes after the driver runs (its status written) make no StatefulSet under this build's name.
	waitFor(t, time.Minute, "the placeholder's status naming "+second.Name, func(ctx context.Context) (bool, error) {
		ph, err := kube().CoreV1().Pods(ns).Get(ctx, p, metav1.GetOptions{})
		if err == nil {
			last = ph.Status.Message
		}
		return err == nil && strings.Contains(ph.Status.Message, "runs in pod "+ns+"/"+second.Name+" "), err
	})
	time.Sleep(3 * time.Second)
	placeholder := getPod(t, ns, p)
	list, err := kube().AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ours []string
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], placeholder) {
			ours = append(ours, list.Items[i].Name)
		}
	}
	if len(ours) != 1 || ours[0] != other.StatefulSet {
		t.Fatalf("the placeholder controls StatefulSets %v, want only %s", ours, other.StatefulSet)
	}

	status := plugin(t, "status", p, "-n", ns)
	expectLines(t, "status", status,
		`^StatefulSet: +`+other.StatefulSet+`, headless Service `+other.Service+`$`,
		`^Driver pod: +`+other.DriverPodName()+` \(uid `+string(second.UID)+`\), Running, `,
	)
	rows := plugin(t, "list", "-n", ns)
	expectLines(t, "list", rows, `^`+p+` +Running +.* `+other.DriverPodName()+` +`+second.Spec.NodeName+` `)
}

// client404 is err, but nil for NotFound (the pod went between the read and the write).
func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
