package webhook

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// FuzzCachedHandlers feeds arbitrary bytes as the pod of a CREATE request to the executor and the
// incarnation handler, each against its golden cache. Beyond admitted's contract: the executor
// handler never refuses, an executor it patches is tied to a driver driverset runs, and an
// executor owned by such a driver (S-0 in the cache) is patched or told why not; a new
// incarnation that is allowed while executors of its app exist in its namespace is held by the
// stale-executor gate (unless it is already bound to a node).
func FuzzCachedHandlers(f *testing.F) {
	executorCache := cacheFrom(f, filepath.Join("testdata", "executor", "cache.yaml"))
	incarnationCache := cacheFrom(f, filepath.Join("testdata", "incarnation", "cache.yaml"))
	executors := &Executor{Reader: executorCache}
	incarnations := &Incarnation{Reader: incarnationCache}
	// Small seeds first: the fuzzer minimizes every new input, which is slow for a full pod.
	// testdata/fuzz/FuzzCachedHandlers holds the inputs the fuzzer found.
	f.Add([]byte(`{"metadata":{"namespace":"analytics","labels":{"spark-role":"executor"},"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"spark-pi-8e3c5a1f0b7d2e49-driver","uid":"6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f","controller":true}]},"spec":{"containers":[{"name":"e","env":[{"name":"SPARK_DRIVER_URL","value":"spark://CoarseGrainedScheduler@10.0.0.1:7078"}]}]}}`), false)
	f.Add([]byte(`{"metadata":{"namespace":"analytics","labels":{"spark-role":"driver","driverset.dev/driver":"spark-pi-8e3c5a1f0b7d2e49-driver","spark-app-selector":"spark-8f2c1d4e6a7b4c9d8e0f1a2b3c4d5e6f"}},"spec":{"schedulingGates":null}}`), true)
	f.Add([]byte(`{"metadata":{"labels":null},"spec":{"containers":null}}`), false)
	f.Add([]byte(`{"metadata":{"namespace":"analytics","labels":{"spark-role":"executor"},"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"spark-pi-8e3c5a1f0b7d2e49-driver-0","uid":"0a1b2c3d-0000-4000-8000-000000000002","controller":true}]},"spec":{"containers":[{"name":"e"}]}}`), false)
	f.Add([]byte(`null`), true)
	for _, p := range []struct {
		path        string
		incarnation bool
	}{
		{filepath.Join("testdata", "executor", "spark-4.1-use-driver-pod-ip.pod.yaml"), false},
		{filepath.Join("testdata", "incarnation", "spark-3.5-stale-executors.pod.yaml"), true},
	} {
		y, err := os.ReadFile(p.path)
		if err != nil {
			f.Fatal(err)
		}
		raw, err := yaml.YAMLToJSON(y)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw, p.incarnation)
		f.Add(raw[:len(raw)/2], p.incarnation)
	}
	f.Fuzz(func(t *testing.T, raw []byte, incarnation bool) {
		var h admission.Handler = executors
		if incarnation {
			h = incarnations
		}
		resp, out := admitted(t, h, raw)
		in := decodedPod(raw)
		if !incarnation {
			if !resp.Allowed {
				t.Fatalf("an executor was refused: %+v", resp.Result)
			}
			if len(resp.Patches) != 0 && (out == nil || out.Labels[contract.LabelDriver] == "") {
				t.Fatalf("a patched executor is not tied to a driverset driver: %+v", out)
			}
			if len(resp.Patches) == 0 && len(resp.Warnings) == 0 && ownedByDriversetDriver(t, executorCache, in, createRequest(raw, false).Namespace) {
				t.Fatalf("an executor of a driver driverset runs was left unpatched without a warning: %+v", resp.Result)
			}
			return
		}
		if !resp.Allowed || in == nil {
			return
		}
		sts, reason := incarnationOf(in)
		if reason != "" || in.Spec.NodeName != "" {
			return
		}
		ns := in.Namespace
		if ns == "" {
			ns = createRequest(raw, false).Namespace
		}
		if !staleExecutorsExist(t, incarnationCache, ns, sts) {
			return
		}
		if out == nil || !convert.HasGate(&out.Spec, contract.GateStaleExecutors) {
			t.Fatalf("a new incarnation allowed while executors of StatefulSet %s exist in %q is not held: %+v", sts, ns, out)
		}
	})
}

// staleExecutorsExist: the cache holds executor pods of StatefulSet sts (any app id) in namespace ns.
func staleExecutorsExist(t *testing.T, r client.Reader, ns, sts string) bool {
	t.Helper()
	var list corev1.PodList
	if err := r.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{
		contract.LabelDriver: sts, contract.LabelSparkRole: contract.RoleExecutor,
	}); err != nil {
		t.Fatal(err)
	}
	return len(list.Items) > 0
}

// ownedByDriversetDriver: executor e (nil when it does not decode) is not marked yet and its
// controller is, in the cache, the driver pod of a driverset StatefulSet with the same UID.
func ownedByDriversetDriver(t *testing.T, r client.Reader, e *corev1.Pod, ns string) bool {
	t.Helper()
	if e == nil || e.Labels[contract.LabelSparkRole] != contract.RoleExecutor || hasLabel(e, contract.LabelDriver) {
		return false
	}
	if e.Namespace != "" {
		ns = e.Namespace
	}
	ref := metav1.GetControllerOf(e)
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Pod" {
		return false
	}
	var owner corev1.Pod
	if err := r.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: ref.Name}, &owner); err != nil {
		return false
	}
	return owner.UID == ref.UID && owner.Labels[contract.LabelDriver] != "" && owner.Labels[contract.LabelSparkRole] == contract.RoleDriver
}
