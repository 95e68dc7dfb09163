package convert

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml from the current output")

// TestGolden converts testdata/<case>.pod.yaml (a driver pod as the webhook receives it) into its
// placeholder, then builds S and H from it: testdata/<case>.{placeholder,statefulset,service}.golden.yaml.
// `go test ./convert -run Golden -update` rewrites them.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.pod.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no testdata/*.pod.yaml: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".pod.yaml")
		t.Run(name, func(t *testing.T) {
			y, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			pod := &corev1.Pod{}
			if err := yaml.UnmarshalStrict(y, pod); err != nil {
				t.Fatal(err)
			}
			p := persisted(pod)
			s, err := StatefulSet(p, testOptions)
			if err != nil {
				t.Fatal(err)
			}
			h, err := Service(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range apiserverChecks(s, h) {
				t.Error(e)
			}
			for kind, obj := range map[string]any{"placeholder": p, "statefulset": s, "service": h} {
				compareGolden(t, filepath.Join("testdata", name+"."+kind+".golden.yaml"), obj)
			}
		})
	}
}

func compareGolden(t *testing.T, path string, obj any) {
	t.Helper()
	got, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs (run with -update to accept the new output); got:\n%s", path, got)
	}
}
