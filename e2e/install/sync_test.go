//go:build testbed

package install

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driverset/driverset/seal"
)

// install.yaml is committed so that `kubectl apply --server-side -f <url>` works; it must be
// exactly what hack/render-install.sh makes of manifests/overlays/self-managed today.
func TestInstallYAMLIsRenderedFromTheSelfManagedOverlay(t *testing.T) {
	want := renderInstall(t)
	got, err := os.ReadFile(filepath.Join(moduleRoot(t), "install.yaml"))
	if err != nil {
		t.Fatalf("%v: run hack/render-install.sh", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(gotLines) || i < len(wantLines); i++ {
		var g, w string
		if i < len(gotLines) {
			g = gotLines[i]
		}
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if g != w {
			t.Fatalf("install.yaml is stale; run hack/render-install.sh (and commit it).\nfirst difference at line %d:\n  install.yaml: %q\n  render:       %q", i+1, g, w)
		}
	}
	// The bytes differ but no line does (a missing or extra trailing newline reads as an empty
	// line on both sides): stale all the same.
	t.Fatalf("install.yaml is stale; run hack/render-install.sh (and commit it).\nit differs from the render only at its end: %d bytes, render %d bytes", len(got), len(want))
}

// The install is the self-managed one: no dependency on cert-manager, no Secret to provide.
func TestInstallYAMLNeedsNoCertManager(t *testing.T) {
	objs := readInstallYAML(t)
	for _, u := range objs {
		if strings.HasPrefix(u.GetAPIVersion(), "cert-manager.io/") {
			t.Errorf("install.yaml has %s, which needs cert-manager", key(u))
		}
	}
	pod := podSpec(t, find(t, objs, "Deployment", "driverset"))
	if !containsString(containerArgs(t, pod), "--self-managed-tls") {
		t.Errorf("driverset does not make its own certificates: args %v", containerArgs(t, pod))
	}
	made := secretsMade(t, objs)
	for _, v := range pod["volumes"].([]any) {
		secret, ok := v.(map[string]any)["secret"].(map[string]any)
		if ok && !made[fmt.Sprint(secret["secretName"])] {
			t.Errorf("the Deployment mounts a Secret nobody makes: %s", toYAML(v))
		}
	}
}

// secretsMade are the Secrets of driverset's namespace that install.yaml makes: those it holds,
// and the seal key, which its key-maker Job makes (driverset make-seal-key) when absent.
func secretsMade(t *testing.T, objs []*unstructured.Unstructured) map[string]bool {
	t.Helper()
	made := map[string]bool{}
	for _, u := range objs {
		switch u.GetKind() {
		case "Secret":
			made[u.GetName()] = true
		case "Job":
			spec, ok, err := unstructured.NestedMap(u.Object, "spec", "template", "spec")
			if err != nil || !ok {
				t.Fatalf("%s has no pod spec: %v", key(u), err)
			}
			if slices.Contains(containerArgs(t, spec), "make-seal-key") {
				made[seal.SecretName] = true
			}
		}
	}
	return made
}

func TestRenderInstallSetsTheReleaseImage(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		image, want, wantErr string
	}{
		{image: "registry.example/team/driverset:v1.2.3"},
		{image: "localhost:5000/driverset:v1"},
		// A release pinned to its digest runs that image, whatever its tag is moved to.
		{image: "registry.example/driverset:v1.2.3@" + digest, want: "registry.example/driverset@" + digest},
		{image: "registry.example/driverset", wantErr: "REPOSITORY:TAG"},
		{image: "localhost:5000/driverset", wantErr: "REPOSITORY:TAG"},
		{image: "registry.example/driverset:v1@sha256:abc", wantErr: "sha256:<64 hex>"},
	} {
		t.Run(tc.image, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "install.yaml")
			cmd := exec.Command(filepath.Join(moduleRoot(t), "hack", "render-install.sh"), out)
			cmd.Env = append(os.Environ(), "KUBECTL="+kubectl(t), "DRIVERSET_IMAGE="+tc.image)
			msg, err := cmd.CombinedOutput()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(string(msg), tc.wantErr) {
					t.Fatalf("want a failure naming %q, got %v: %s", tc.wantErr, err, msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v: %s", err, msg)
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			objs := decodeBytes(t, data)
			c := container(t, podSpec(t, find(t, objs, "Deployment", "driverset")))
			want := tc.want
			if want == "" {
				want = tc.image
			}
			if c["image"] != want {
				t.Errorf("image = %v, want %s", c["image"], want)
			}
			// Apart from the image, the release render is install.yaml.
			plain := string(renderInstall(t))
			if strings.ReplaceAll(string(data), want, "driverset/driverset:dev") != plain {
				t.Error("the release render differs from install.yaml in more than the image")
			}
		})
	}
}

// The chart is self-contained: `helm package` and a chart repository take its folder alone, so no
// file in it may be a symbolic link (one pointing outside the chart would be packaged as whatever
// it resolves to on the packager's machine, or not at all).
func TestChartHasNoSymlinks(t *testing.T) {
	dir := filepath.Join(moduleRoot(t), "charts", "driverset")
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(path)
			t.Errorf("%s is a symbolic link (to %s): the chart must carry its own copy", path, target)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The chart carries its own copies of the monitoring component's alerts and dashboard (see
// TestChartHasNoSymlinks); they are the component's files byte for byte, so the two installs never
// drift apart. After editing manifests/components/monitoring, copy the file into
// charts/driverset/files/.
func TestChartMonitoringFilesAreTheComponents(t *testing.T) {
	root := moduleRoot(t)
	for _, name := range []string{"prometheusrule.yaml", "dashboard.json"} {
		want, err := os.ReadFile(filepath.Join(root, monitoringDir, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, "charts", "driverset", "files", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("charts/driverset/files/%s differs from %s/%s: cp %[2]s/%[1]s charts/driverset/files/", name, monitoringDir, name)
		}
	}
}

// Chart.yaml names who maintains the chart (Artifact Hub and `helm show chart` show them).
func TestChartHasMaintainers(t *testing.T) {
	ch, err := loader.Load(filepath.Join(moduleRoot(t), "charts", "driverset"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Metadata.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(ch.Metadata.Maintainers) == 0 {
		t.Fatal("Chart.yaml has no maintainers")
	}
	for _, m := range ch.Metadata.Maintainers {
		if m.Name == "" || m.Email == "" && m.URL == "" {
			t.Errorf("maintainer %+v: give a name and a way to reach them (email or url)", m)
		}
	}
}
