//go:build testbed

package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// Attack: a seal is the webhook's word to the controller that it admitted this pod's real create.
// A tenant with only `edit` gets seals without a real create of the pod they end up on: from a
// dry-run (which leaves no pod, so the name stays free), and from a generateName create (sealed
// before the apiserver picks the name). Each seal is replayed within seconds onto a placeholder
// the tenant shaped by hand, with the opt-in label (the webhook's re-invocation check sees it)
// and without (the webhook never sees it). driverset builds nothing from any of them.
func TestTenantCannotReplayASealFromAnotherCreate(t *testing.T) {
	ns := namespace(t, nil)
	c := tenant(t, ns)
	// The generateName create itself is admitted today, its driver given the GPUs it asked for:
	// only what is built for the replayed name is in question.
	replay := func(t *testing.T, sealed *corev1.Pod, name string, optedIn bool, reason string) {
		t.Helper()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: name, GenerateName: sealed.GenerateName, Labels: sealed.Labels, Annotations: sealed.Annotations,
			OwnerReferences: sealed.OwnerReferences, Finalizers: sealed.Finalizers,
		}, Spec: sealed.Spec}
		if !optedIn {
			pod.Labels = copyWithout(pod.Labels, contract.LabelResilient)
		}
		_, err := c.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
		switch {
		case err != nil && strings.Contains(err.Error(), "arrives shaped as a driverset placeholder"):
			t.Logf("refused: %v", err)
			noGPUDriverAmong(t, c, ns, name, "", ofApp(name))
		case err != nil:
			t.Fatalf("the replay was answered %v, want driverset's refusal or nothing built", err)
		default:
			noGPUDriverAmong(t, c, ns, name, reason, ofApp(name))
		}
	}

	for _, optedIn := range []bool{true, false} {
		label := map[bool]string{true: "opted in", false: "not opted in"}[optedIn]
		t.Run("a dry-run's seal, "+label, func(t *testing.T) {
			name := map[bool]string{true: "dry-in", false: "dry-out"}[optedIn]
			pod := gpuDriver(t, ns, name)
			got, err := c.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				t.Fatalf("the dry-run was refused: %v", err)
			}
			if got.Annotations[contract.AnnotationResources] == "" {
				t.Fatalf("the dry-run's answer is not a placeholder: %v", got.Annotations)
			}
			replay(t, got, name, optedIn, "made for a dry-run create")
		})

		t.Run("a generateName create's seal, "+label, func(t *testing.T) {
			pod := gpuDriver(t, ns, "")
			pod.GenerateName = "gen-"
			got, err := c.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
			if err != nil {
				if !strings.Contains(err.Error(), "has no name") {
					t.Fatalf("the generateName driver was refused for another reason: %v", err)
				}
				t.Logf("refused: %v", err)
				return
			}
			t.Logf("admitted as %s, sealed %s", got.Name, got.Annotations["driverset.dev/seal"])
			replay(t, got, map[bool]string{true: "other-in", false: "other-out"}[optedIn], optedIn, "does not match")
		})
	}
}

// driverPodNamed is the driver pod spark-submit would post in ns, named name.
func driverPodNamed(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	plan, err := app(ns, name+"x").Plan()
	if err != nil {
		t.Fatal(err)
	}
	pod := plan.DriverPod.DeepCopy()
	pod.Name = name
	return pod
}

// gpuDriver is the driver pod spark-submit would post in ns as name, asking for 8 GPUs itself.
func gpuDriver(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	pod := driverPodNamed(t, ns, name)
	eight := resource.MustParse("8")
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name != contract.DriverContainerName {
			continue
		}
		r := &pod.Spec.Containers[i].Resources
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		if r.Limits == nil {
			r.Limits = corev1.ResourceList{}
		}
		r.Requests[gpu], r.Limits[gpu] = eight, eight
	}
	return pod
}

// ofApp is true of the placeholder p and its driver pods.
func ofApp(p string) func(*corev1.Pod) bool {
	names := contract.NamesFor(p)
	return func(pod *corev1.Pod) bool {
		return pod.Name == p || strings.HasPrefix(pod.Name, names.StatefulSet+"-")
	}
}

func copyWithout(m map[string]string, key string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}
