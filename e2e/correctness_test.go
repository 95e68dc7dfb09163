//go:build testbed

package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/driverset/driverset/contract"
)

// Issue 10, "A failed driver on a node that dies hangs": the driver fails and its node dies before
// its pod is gone. driverset deletes the pod to restart it, no kubelet confirms the deletion, and
// the recorded exit proves the process gone: driverset force-deletes that incarnation and the
// restart goes on elsewhere.
func TestFailedDriverOnADyingNodeIsRestarted(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	a := app(ns, "fail-then-die")
	s := submit(t, a)
	names := contract.NamesFor(s.plan.DriverPodName)
	d0 := runningDriver(t, ns, names, "")

	replaceNode(t, d0.Spec.NodeName)
	if err := bed.cluster.KillNode(ctx, d0.Spec.NodeName); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bed.cluster.ReviveNode(context.Background(), d0.Spec.NodeName) })
	exitDriver(t, d0, 1) // the kubelet's last report, just before it went

	d1 := runningDriverWithin(t, 2*time.Minute, ns, names, string(d0.UID))
	if d1.Spec.NodeName == d0.Spec.NodeName {
		t.Errorf("the new incarnation runs on the dead node %s", d1.Spec.NodeName)
	}
	if p := getPod(t, ns, s.plan.DriverPodName); p.Annotations[contract.AnnotationRestarts] != "1" {
		t.Errorf("restart count %q, want 1", p.Annotations[contract.AnnotationRestarts])
	}
	exitDriver(t, d1, 0)
	if res := s.Wait(t, 60*time.Second); res.FinalPhase != corev1.PodSucceeded {
		t.Errorf("spark-submit's final phase %s, want Succeeded", res.FinalPhase)
	}
}

// Issue 10, "A finished app is re-run": someone deletes the StatefulSet of a finished app; driverset
// makes it again with no pod, and the driver is not run again.
func TestFinishedAppIsNotRerunWhenItsStatefulSetIsDeleted(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	s := submit(t, app(ns, "done"))
	names := contract.NamesFor(s.plan.DriverPodName)
	d0 := runningDriver(t, ns, names, "")
	exitDriver(t, d0, 0)
	if res := s.Wait(t, 60*time.Second); res.FinalPhase != corev1.PodSucceeded {
		t.Fatalf("spark-submit's final phase %s, want Succeeded", res.FinalPhase)
	}
	waitFor(t, 30*time.Second, "the finished app's driver pod gone", func(ctx context.Context) (bool, error) {
		_, err := kube().CoreV1().Pods(ns).Get(ctx, names.DriverPodName(), metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})

	old := getStatefulSet(t, ns, names.StatefulSet)
	w, err := kube().CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + names.DriverPodName()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := kube().AppsV1().StatefulSets(ns).Delete(ctx, names.StatefulSet, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the StatefulSet made again", func(ctx context.Context) (bool, error) {
		sts, err := kube().AppsV1().StatefulSets(ns).Get(ctx, names.StatefulSet, metav1.GetOptions{})
		return err == nil && sts.UID != old.UID, nil
	})
	if r := getStatefulSet(t, ns, names.StatefulSet).Spec.Replicas; r == nil || *r != 0 {
		t.Errorf("the finished app's StatefulSet was made again with replicas %d, want 0", ptrValue(r))
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case e := <-w.ResultChan():
			if p, ok := e.Object.(*corev1.Pod); ok {
				t.Fatalf("the finished driver was run again: %s %s (%s)", e.Type, p.Name, p.UID)
			}
		case <-deadline:
			return
		}
	}
}

// Issue 10, "StatefulSet drift is never corrected": `kubectl scale --replicas=0` on a running app's
// StatefulSet stops its driver; driverset scales it back to 1, the driver runs again and the app
// completes (the placeholder does not stay Running forever).
func TestScaledDownAppIsScaledBack(t *testing.T) {
	ns := namespace(t, nil)
	s := submit(t, app(ns, "scaled"))
	names := contract.NamesFor(s.plan.DriverPodName)
	d0 := runningDriver(t, ns, names, "")

	scale(t, ns, names.StatefulSet, 0)
	// The StatefulSet controller may or may not have stopped the driver before driverset acts.
	waitFor(t, 30*time.Second, "the StatefulSet back at 1 replica", func(ctx context.Context) (bool, error) {
		return *getStatefulSet(t, ns, names.StatefulSet).Spec.Replicas == 1, nil
	})
	expectEvents(t, getPod(t, ns, s.plan.DriverPodName), "ReplicasCorrected")
	d1 := runningDriver(t, ns, names, "")
	t.Logf("the driver runs in %s (first incarnation %s)", short(d1.UID), short(d0.UID))
	exitDriver(t, d1, 0)
	if res := s.Wait(t, 60*time.Second); res.FinalPhase != corev1.PodSucceeded {
		t.Errorf("spark-submit's final phase %s, want Succeeded", res.FinalPhase)
	}
}

func ptrValue(r *int32) int32 {
	if r == nil {
		return -1
	}
	return *r
}

// TestScaledUpAppNeverRunsASecondDriver: `kubectl scale --replicas=2` on an app's StatefulSet
// never creates S-1 (a second driver JVM of the same app): the incarnations webhook refuses any
// ordinal but 0, and driverset scales the StatefulSet back to 1.
func TestScaledUpAppNeverRunsASecondDriver(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	s := submit(t, app(ns, "scaledup"))
	names := contract.NamesFor(s.plan.DriverPodName)
	d0 := runningDriver(t, ns, names, "")

	scale(t, ns, names.StatefulSet, 2)
	waitFor(t, 30*time.Second, "the StatefulSet back at 1 replica", func(ctx context.Context) (bool, error) {
		return *getStatefulSet(t, ns, names.StatefulSet).Spec.Replicas == 1, nil
	})
	// Give the StatefulSet controller time to have tried S-1.
	time.Sleep(3 * time.Second)
	if _, err := kube().CoreV1().Pods(ns).Get(ctx, names.StatefulSet+"-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("S-1 exists (err %v): a second driver of the app", err)
	}
	if d := getPod(t, ns, names.DriverPodName()); d.UID != d0.UID {
		t.Errorf("the driver was replaced (%s → %s) by the scale-up", short(d0.UID), short(d.UID))
	}
	exitDriver(t, d0, 0)
	if res := s.Wait(t, 60*time.Second); res.FinalPhase != corev1.PodSucceeded {
		t.Errorf("spark-submit's final phase %s, want Succeeded", res.FinalPhase)
	}
}

// scale sets the StatefulSet's replicas as `kubectl scale` does, retrying when driverset wrote the
// StatefulSet in between.
func scale(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc, err := kube().AppsV1().StatefulSets(ns).GetScale(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		sc.Spec.Replicas = replicas
		_, err = kube().AppsV1().StatefulSets(ns).UpdateScale(context.Background(), name, sc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
