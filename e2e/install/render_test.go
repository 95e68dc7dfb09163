//go:build testbed

package install

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/driverset/driverset/e2e/harness"
	"github.com/driverset/driverset/e2e/testbed"
)

// The namespace every install puts driverset in.
const systemNamespace = "driverset-system"

// kustomizations are every folder of manifests/ that an admin (or a test) renders, in the order
// the cluster test applies them: the default install, self-managed, comes last.
func kustomizations() []string {
	return []string{"base", "overlays/local", "overlays/cert-manager", "overlays/self-managed"}
}

// kubectl is the test bed's kubectl. Missing binaries fail the test: they are never a skip.
func kubectl(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(testbed.EnvBinDir)
	if dir == "" {
		t.Fatalf("%s is not set: it names the test bed's binaries (hack/testbed-build.sh prints it)", testbed.EnvBinDir)
	}
	path := filepath.Join(dir, "kubectl")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no kubectl in the test bed's binaries: %v", err)
	}
	return path
}

func moduleRoot(t testing.TB) string {
	t.Helper()
	root, err := harness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// render runs `kubectl kustomize manifests/<dir>`.
func render(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	objs, err := harness.Render(ctx, kubectl(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// readInstallYAML decodes the committed install.yaml.
func readInstallYAML(t testing.TB) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := harness.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("install.yaml: %v", err)
	}
	return objs
}

// renderInstall runs hack/render-install.sh into a temporary file and returns its bytes.
func renderInstall(t testing.TB, env ...string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "install.yaml")
	cmd := exec.Command(filepath.Join(moduleRoot(t), "hack", "render-install.sh"), out)
	cmd.Env = append(append(os.Environ(), "KUBECTL="+kubectl(t)), env...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/render-install.sh: %v\n%s", err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// key names an object in messages and maps: Kind/namespace/name.
func key(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s/%s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
}

func keys(objs []*unstructured.Unstructured) []string {
	ks := make([]string, 0, len(objs))
	for _, u := range objs {
		ks = append(ks, key(u))
	}
	sort.Strings(ks)
	return ks
}

func byKey(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	m := make(map[string]*unstructured.Unstructured, len(objs))
	for _, u := range objs {
		m[key(u)] = u
	}
	return m
}

func find(t testing.TB, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	t.Fatalf("no %s %s among %v", kind, name, keys(objs))
	return nil
}

// toYAML is for failure messages.
func toYAML(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(string(b))
}

func decodeBytes(t testing.TB, data []byte) []*unstructured.Unstructured {
	t.Helper()
	objs, err := harness.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// podSpec is a Deployment's pod template spec.
func podSpec(t testing.TB, deploy *unstructured.Unstructured) map[string]any {
	t.Helper()
	spec, ok, err := unstructured.NestedMap(deploy.Object, "spec", "template", "spec")
	if err != nil || !ok {
		t.Fatalf("%s has no pod spec: %v", key(deploy), err)
	}
	return spec
}

// container is the driverset container of a pod spec.
func container(t testing.TB, pod map[string]any) map[string]any {
	t.Helper()
	cs, _ := pod["containers"].([]any)
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok && m["name"] == "driverset" {
			return m
		}
	}
	t.Fatalf("no driverset container in %s", toYAML(pod))
	return nil
}

func containerArgs(t testing.TB, pod map[string]any) []string {
	t.Helper()
	raw, _ := container(t, pod)["args"].([]any)
	args := make([]string, 0, len(raw))
	for _, a := range raw {
		args = append(args, fmt.Sprint(a))
	}
	return args
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
