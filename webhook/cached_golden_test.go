package webhook

import (
	"os"
	"path/filepath"
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
// apiserver's reinvocation), and a dry-run gets the same answer but for the seal.
func cachedGolden(t *testing.T, dir string, handler func(client.Reader) admission.Handler) {
	inputs, err := filepath.Glob(filepath.Join("testdata", dir, "*.pod.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no testdata/%s/*.pod.yaml: %v", dir, err)
	}
	h := handler(cacheFrom(t, filepath.Join("testdata", dir, "cache.yaml")))
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".pod.yaml")
		t.Run(name, func(t *testing.T) {
			checkGolden(t, h, readPodJSON(t, in), filepath.Join("testdata", dir, name+".golden.yaml"))
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
