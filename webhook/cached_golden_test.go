package webhook

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/driverset/driverset/convert"
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

// cacheFrom is a fake client holding the pods and StatefulSets of a List file, with the index of
// StatefulSets by their controller that driverset's cache has (convert.IndexController): the
// handlers only read it, as they read the informer cache.
func cacheFrom(t testing.TB, path string, opts ...func(*fake.ClientBuilder)) client.Reader {
	t.Helper()
	y, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		metav1.TypeMeta `json:",inline"`
		Items           []json.RawMessage `json:"items"`
	}
	if err := yaml.UnmarshalStrict(y, &list); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b := fake.NewClientBuilder().WithIndex(&appsv1.StatefulSet{}, convert.IndexController,
		func(o client.Object) []string { return convert.ControllerUID(o) })
	for i, raw := range list.Items {
		var kind metav1.TypeMeta
		if err := json.Unmarshal(raw, &kind); err != nil {
			t.Fatalf("%s: item %d: %v", path, i, err)
		}
		var obj client.Object
		switch kind.Kind {
		case "Pod":
			obj = &corev1.Pod{}
		case "StatefulSet":
			obj = &appsv1.StatefulSet{}
		default:
			t.Fatalf("%s: item %d: kind %q, want Pod or StatefulSet", path, i, kind.Kind)
		}
		if err := yaml.UnmarshalStrict(raw, obj); err != nil {
			t.Fatalf("%s: item %d: %v", path, i, err)
		}
		b = b.WithObjects(obj)
	}
	for _, o := range opts {
		o(b)
	}
	return b.Build()
}
