package webhook

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"
)

// FuzzCachedHandlers feeds arbitrary bytes as the pod of a CREATE request to the executor and the
// incarnation handler, each against its golden cache: every request gets an answer without a
// panic, a patch applies to the object it was made for, a refusal carries no patch, and the
// executor handler never refuses.
func FuzzCachedHandlers(f *testing.F) {
	executors := &Executor{Reader: cacheFrom(f, filepath.Join("testdata", "executor", "cache.yaml"))}
	incarnations := &Incarnation{Reader: cacheFrom(f, filepath.Join("testdata", "incarnation", "cache.yaml"))}
	// Small seeds first: the fuzzer minimizes every new input, which is slow for a full pod.
	f.Add([]byte(`{"metadata":{"namespace":"analytics","labels":{"spark-role":"executor"},"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"spark-pi-8e3c5a1f0b7d2e49-driver","uid":"6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f","controller":true}]},"spec":{"containers":[{"name":"e","env":[{"name":"SPARK_DRIVER_URL","value":"spark://CoarseGrainedScheduler@10.0.0.1:7078"}]}]}}`), false)
	f.Add([]byte(`{"metadata":{"namespace":"analytics","labels":{"spark-role":"driver","driverset.dev/driver":"spark-pi-8e3c5a1f0b7d2e49-driver","spark-app-selector":"spark-8f2c1d4e6a7b4c9d8e0f1a2b3c4d5e6f"}},"spec":{"schedulingGates":null}}`), true)
	f.Add([]byte(`{"metadata":{"labels":null},"spec":{"containers":null}}`), false)
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
		resp := h.Handle(context.Background(), createRequest(raw, false))
		if resp.Result == nil && len(resp.Patches) == 0 {
			t.Fatalf("response without a result or a patch: %+v", resp)
		}
		if !resp.Allowed && len(resp.Patches) != 0 {
			t.Fatalf("a refusal with a patch: %+v", resp)
		}
		if !incarnation && !resp.Allowed {
			t.Fatalf("an executor was refused: %+v", resp.Result)
		}
		if len(resp.Patches) != 0 {
			patched := applyPatch(t, raw, resp.Patches)
			if !json.Valid(patched) {
				t.Fatalf("the patched pod is not JSON: %s", patched)
			}
		}
	})
}
