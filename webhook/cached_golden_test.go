package webhook

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"
)

// TestExecutorGolden admits every testdata/executor/<case>.pod.yaml against the informer cache
// in testdata/executor/cache.yaml, and compares the outcome with <case>.golden.yaml
// (`go test ./webhook -run Golden -update` rewrites them).
func TestExecutorGolden(t *testing.T) {
	cachedGolden(t, "executor", func(r client.Reader) admission.Handler { return &Executor{Reader: r} })
}

// TestIncarnationGolden does the same for new driver incarnations, in testdata/incarnation.
func TestIncarnationGolden(t *testing.T) {
	cachedGolden(t, "incarnation", func(r client.Reader) admission.Handler { return &Incarnation{Reader: r} })
}

// cachedGolden runs the golden cases of a handler that reads the cache: the verdict and the
// persisted pod match the golden file, a second admission of the patched pod changes nothing (the
// apiserver's reinvocation), and a dry-run gets the same answer.
func cachedGolden(t *testing.T, dir string, handler func(client.Reader) admission.Handler) {
	inputs, err := filepath.Glob(filepath.Join("testdata", dir, "*.pod.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no testdata/%s/*.pod.yaml: %v", dir, err)
	}
	h := handler(cacheFrom(t, filepath.Join("testdata", dir, "cache.yaml")))
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".pod.yaml")
		t.Run(name, func(t *testing.T) {
			raw := readPodJSON(t, in)
			resp := h.Handle(context.Background(), createRequest(raw, false))
			got := summarize(t, raw, resp)

			golden := filepath.Join("testdata", dir, name+".golden.yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("%s differs from the handler's output (run with -update to accept it):\n%s", golden, diffLines(string(want), string(got)))
			}

			t.Run("idempotent", func(t *testing.T) {
				if !resp.Allowed {
					t.Skip("refused: nothing to apply")
				}
				again := h.Handle(context.Background(), createRequest(applyPatch(t, raw, resp.Patches), false))
				if !again.Allowed || len(again.Patches) != 0 {
					t.Errorf("second admission of the patched pod: allowed=%v patches=%v, want allowed with no patch", again.Allowed, again.Patches)
				}
			})
			t.Run("dry-run", func(t *testing.T) {
				dry := h.Handle(context.Background(), createRequest(raw, true))
				if !reflect.DeepEqual(normalized(dry), normalized(resp)) {
					t.Errorf("dry-run answered\n%+v\nwant the same as without dry-run\n%+v", dry, resp)
				}
			})
		})
	}
}

// cacheFrom is a fake client holding the pods of a List file: the handlers only read it, as they
// read the informer cache.
func cacheFrom(t testing.TB, path string, opts ...func(*fake.ClientBuilder)) client.Reader {
	t.Helper()
	y, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var list corev1.PodList
	if err := yaml.UnmarshalStrict(y, &list); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b := fake.NewClientBuilder()
	for i := range list.Items {
		b = b.WithObjects(&list.Items[i])
	}
	for _, o := range opts {
		o(b)
	}
	return b.Build()
}
