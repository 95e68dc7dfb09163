package webhook

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	jsonpatch4 "gopkg.in/evanphx/json-patch.v4"
	"sigs.k8s.io/yaml"
)

// later is a testdata/reinvocation/<case>.later.yaml: what a mutating webhook called after
// driverset's does to a pod, and which testdata/ pod it is done to.
type later struct {
	// Pod is the pod as its creator posts it, a file in testdata/.
	Pod string `json:"pod"`
	// Patch is that webhook's answer, a JSON patch.
	Patch []map[string]any `json:"patch"`
}

// TestDriverGoldenReinvoked plays an admission in which a later webhook changes the pod: the pod
// is admitted by the handler, patched as the apiserver would, changed by the later webhook's patch,
// and admitted again, as a reinvocationPolicy IfNeeded webhook is. The second answer must equal
// testdata/reinvocation/<case>.golden.yaml (`-update` rewrites them). Cases named "*-enforced" go
// to the namespace-policy handler.
func TestDriverGoldenReinvoked(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "reinvocation", "*.later.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no testdata/reinvocation/*.later.yaml: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".later.yaml")
		t.Run(name, func(t *testing.T) {
			l := readLater(t, in)
			d := &Driver{Seal: testSeal(), Enforced: strings.HasSuffix(name, "-enforced")}
			raw := readPodJSON(t, filepath.Join("testdata", l.Pod))
			first := d.Handle(context.Background(), createRequest(raw, false))
			if !first.Allowed {
				t.Fatalf("the first admission refused the pod (%+v): nothing for a later webhook to change", first.Result)
			}
			changed := laterPatch(t, applyPatch(t, raw, first.Patches), l.Patch)
			dry := d.Handle(context.Background(), createRequest(raw, true))
			dryChanged := laterPatch(t, applyPatch(t, raw, dry.Patches), l.Patch)
			checkGoldenDry(t, d, changed, dryChanged, filepath.Join("testdata", "reinvocation", name+".golden.yaml"))
		})
	}
}

func readLater(t *testing.T, path string) later {
	t.Helper()
	y, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var l later
	if err := yaml.UnmarshalStrict(y, &l); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if l.Pod == "" || len(l.Patch) == 0 {
		t.Fatalf("%s: want a pod and a patch", path)
	}
	return l
}

// laterPatch applies the later webhook's patch as the apiserver applies any webhook's.
func laterPatch(t *testing.T, raw []byte, ops []map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch4.DecodePatch(b)
	if err != nil {
		t.Fatalf("the later webhook's patch: %v", err)
	}
	out, err := p.Apply(raw)
	if err != nil {
		t.Fatalf("the later webhook's patch does not apply: %v", err)
	}
	return out
}
