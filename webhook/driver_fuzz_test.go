package webhook

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzHandle feeds arbitrary bytes as the pod of a CREATE request: the handler must answer every
// one without panicking, and a patch it returns must apply to the object it was given.
func FuzzHandle(f *testing.F) {
	// Small seeds: the fuzzer minimizes every new input, which is slow for a full Spark pod.
	small, err := json.Marshal(sparkDriver())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(small, false)
	f.Add(small, true)
	f.Add(small[:len(small)/2], true)
	y, err := os.ReadFile(filepath.Join("testdata", "spark-3.5.pod.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	full, err := yaml.YAMLToJSON(y)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(full, false)
	f.Add([]byte(`{"metadata":{"labels":{"spark-role":"driver"}},"spec":{"containers":[{"name":"spark-kubernetes-driver","args":["driver"]}]}}`), true)
	f.Add([]byte(`{"metadata":{"labels":null},"spec":{"containers":null}}`), true)
	f.Add([]byte(`null`), false)
	f.Fuzz(func(t *testing.T, raw []byte, enforced bool) {
		resp := (&Driver{Enforced: enforced}).Handle(context.Background(), createRequest(raw, false))
		if resp.Result == nil && len(resp.Patches) == 0 {
			t.Fatalf("response without a result or a patch: %+v", resp)
		}
		if !resp.Allowed && len(resp.Patches) != 0 {
			t.Fatalf("a refusal with a patch: %+v", resp)
		}
		if len(resp.Patches) != 0 {
			applyPatch(t, raw, resp.Patches)
		}
	})
}
