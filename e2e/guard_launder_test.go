//go:build testbed

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// gpu is the extended resource a tenant tries to launder into S-0.
const gpu corev1.ResourceName = "nvidia.com/gpu"

// gpuResources is a driverset.dev/resources value that gives the driver container 8 GPUs.
const gpuResources = `{"spark-kubernetes-driver":{"requests":{"cpu":"1","memory":"1Gi","nvidia.com/gpu":"8"},"limits":{"memory":"1Gi","nvidia.com/gpu":"8"}}}`

// Attack: S-0 takes its resources from the placeholder's driverset.dev/resources annotation, and
// is created by the StatefulSet controller, not by the tenant, so no policy on who may ask for a
// GPU ever sees them. A tenant with only `edit` in the namespace tries three ways to get a GPU
// into S-0 through that annotation; driverset builds nothing from any of them.
func TestTenantCannotLaunderAGPUThroughThePlaceholder(t *testing.T) {
	ns := namespace(t, nil)
	c := tenant(t, ns)

	t.Run("a pod posted already shaped as a placeholder", func(t *testing.T) {
		pod := preShaped(t, ns, "shaped")
		_, err := c.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "arrives shaped as a driverset placeholder") {
			t.Errorf("the create was answered %v, want driverset's refusal", err)
		} else {
			t.Logf("refused: %v", err)
		}
		noGPUDriver(t, c, ns, pod.Name, "")
	})

	t.Run("a shaped pod the webhook never sees (not opted in)", func(t *testing.T) {
		pod := preShaped(t, ns, "unseen")
		delete(pod.Labels, contract.LabelResilient)
		if _, err := c.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		noGPUDriver(t, c, ns, pod.Name, "has no seal")
	})

	t.Run("the annotation of a real placeholder edited, then its StatefulSet deleted", func(t *testing.T) {
		r := startApp(t, app(ns, "edited"), 0)
		p := r.sub.plan.DriverPodName
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{contract.AnnotationResources: gpuResources}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CoreV1().Pods(ns).Patch(context.Background(), p, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("the tenant could not edit the annotation: %v", err)
		}
		background := metav1.DeletePropagationBackground
		if err := c.AppsV1().StatefulSets(ns).Delete(context.Background(), r.names.StatefulSet,
			metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
			t.Fatalf("the tenant could not delete the StatefulSet: %v", err)
		}
		noGPUDriver(t, c, ns, p, "does not match")
	})
}

// preShaped is the driver pod spark-submit would post in ns, shaped by hand into a placeholder as
// driverset's webhook makes one, with 8 GPUs recorded for S-0 and none asked for by the pod itself.
func preShaped(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	plan, err := app(ns, name).Plan()
	if err != nil {
		t.Fatal(err)
	}
	pod := plan.DriverPod.DeepCopy()
	if err := convert.ToPlaceholder(pod); err != nil {
		t.Fatal(err)
	}
	pod.Annotations[contract.AnnotationResources] = gpuResources
	return pod
}

// noGPUDriver waits until the placeholder p tells why driverset builds nothing from it (reason;
// "" when p was refused at admission) or a StatefulSet of p's exists, then checks that none does
// and that no pod in ns asks for a GPU: what the StatefulSet controller makes from the annotation.
func noGPUDriver(t *testing.T, c kubernetes.Interface, ns, p, reason string) {
	t.Helper()
	noGPUDriverAmong(t, c, ns, p, reason, func(*corev1.Pod) bool { return true })
}

// noGPUDriverAmong is noGPUDriver looking only at the pods among says are in question: where the
// namespace also holds drivers legitimately given GPUs.
func noGPUDriverAmong(t *testing.T, c kubernetes.Interface, ns, p, reason string, among func(*corev1.Pod) bool) {
	t.Helper()
	names := contract.NamesFor(p)
	built := func(ctx context.Context) bool {
		_, err := kube().AppsV1().StatefulSets(ns).Get(ctx, names.StatefulSet, metav1.GetOptions{})
		return err == nil
	}
	if _, err := c.CoreV1().Pods(ns).Get(context.Background(), p, metav1.GetOptions{}); err == nil {
		waitFor(t, 60*time.Second, "the placeholder saying why no driver is built, or a driver built", func(ctx context.Context) (bool, error) {
			got, err := c.CoreV1().Pods(ns).Get(ctx, p, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return (reason != "" && strings.Contains(got.Status.Message, reason)) || built(ctx), nil
		})
		t.Logf("placeholder %s: %s", p, getPod(t, ns, p).Status.Message)
		// A StatefulSet made from the pod would come in the same reconcile that wrote the reason;
		// give the StatefulSet controller time to make its pod too.
		time.Sleep(3 * time.Second)
	}
	if built(context.Background()) {
		t.Errorf("StatefulSet %s exists: driverset built a driver from a placeholder it did not make", names.StatefulSet)
	}
	pods, err := kube().CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods.Items {
		if !among(&pod) {
			continue
		}
		for _, ct := range pod.Spec.Containers {
			if q, ok := ct.Resources.Limits[gpu]; ok {
				t.Errorf("pod %s (controlled by %s) asks for %s GPUs on node %q", pod.Name, controllerName(&pod), q.String(), pod.Spec.NodeName)
			}
		}
	}
}

func controllerName(o metav1.Object) string {
	if ref := metav1.GetControllerOf(o); ref != nil {
		return ref.Kind + " " + ref.Name
	}
	return "nothing"
}
