//go:build testbed

// Package realrelease installs driverset as a platform team does, on real nodes: a release from
// its folder alone (dist/: install.yaml applied, the chart by the helm CLI), and the chart's whole
// Helm life, uninstall hook included. Each on a test bed of its own (one real node), not
// e2e/realnode's, whose shared install from the repository's manifests these would replace.
package realrelease

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/driverset/driverset/e2e/harness"
	"github.com/driverset/driverset/e2e/images"
	"github.com/driverset/driverset/e2e/testbed"
	"github.com/driverset/driverset/internal/oci"
)

// releaseDirEnv names a release folder to install (say dist/ after `make release`); unset, the
// test builds one with hack/release into a temp dir.
const releaseDirEnv = "DRIVERSET_RELEASE_DIR"

// TestReleaseInstallsFromDist loads the released image into a real node as a registry pull would
// leave it, applies the released install.yaml and nothing else, and waits for driverset's
// replicas to be Ready on the image install.yaml pins, and for its webhook to convert an opted-in
// driver pod (the README's install check).
func TestReleaseInstallsFromDist(t *testing.T) {
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	root, err := harness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dist := os.Getenv(releaseDirEnv)
	if dist == "" {
		dist = filepath.Join(t.TempDir(), "dist")
		start := time.Now()
		// The node runs the host's architecture: the other platforms would only be compiled
		// (minutes cold) and never run; hack/release's test and `make release-check` read them.
		// hack/release is a module of its own (its go.mod holds helm): run it from its folder.
		cmd := exec.CommandContext(ctx, "go", "run", ".", "-out", dist, "-version", "v0.0.0-e2e",
			"-image-repo", "registry.test/driverset/driverset", "-platforms", "linux/"+runtime.GOARCH, "-allow-dirty")
		cmd.Dir = filepath.Join(root, "hack", "release")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("hack/release: %v\n%s", err, b)
		}
		t.Logf("release built into %s in %s", dist, time.Since(start).Round(time.Second))
	}
	ref, err := os.ReadFile(filepath.Join(dist, "image-ref.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// repo:tag@sha256:…; a pod of install.yaml names repo@sha256:…, which the kubelet asks
	// containerd for. A pull records both names; the import names the index both ways too.
	repoTag, digest, ok := strings.Cut(strings.TrimSpace(string(ref)), "@")
	if !ok {
		t.Fatalf("image-ref.txt: %q", ref)
	}
	pinned := repoTag[:strings.LastIndex(repoTag, ":")] + "@" + digest

	dir := t.TempDir()
	layout, err := oci.ReadLayoutDir(filepath.Join(dist, "image"))
	if err != nil {
		t.Fatal(err)
	}
	if err := layout.Tag(digest, map[string]string{oci.AnnotationContainerdName: pinned}); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "release-image.tar")
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	if err := layout.WriteTar(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	pauseBin, err := images.GoBinary(ctx, "./e2e/images/pause")
	if err != nil {
		t.Fatal(err)
	}
	pause := filepath.Join(dir, "pause.tar")
	if _, err := images.WriteOCIArchiveFile(pause, images.Pause(pauseBin)); err != nil {
		t.Fatal(err)
	}

	// What a platform team takes from dist/: install.yaml, applied as it is, and the chart,
	// installed with its defaults (which the release pinned to the image's digest). Each on a
	// test bed of its own.
	t.Run("install.yaml", func(t *testing.T) {
		in, err := os.Open(filepath.Join(dist, "install.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := harness.Decode(in)
		_ = in.Close()
		if err != nil {
			t.Fatal(err)
		}
		apply := func(ctx context.Context, _ *testing.T, cluster *testbed.Cluster) error {
			return harness.Apply(ctx, cluster.Config, objs)
		}
		installed(ctx, t, "install.yaml", apply, nil, pause, archive, pinned)
	})
	t.Run("chart", func(t *testing.T) {
		charts, err := filepath.Glob(filepath.Join(dist, "driverset-*.tgz"))
		if err != nil || len(charts) != 1 {
			t.Fatalf("dist/ holds charts %v (%v), want one", charts, err)
		}
		helm, err := harness.HelmBinary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// docs/install.md's Install with Helm, the released chart in place of charts/driverset:
		// no --set, its default image the release's by digest; then its test hook, for real.
		install := func(ctx context.Context, t *testing.T, cluster *testbed.Cluster) error {
			runIn(ctx, t, cluster, helm, "install", "driverset", charts[0], "-n", "driverset-system", "--create-namespace")
			return nil
		}
		test := func(ctx context.Context, t *testing.T, cluster *testbed.Cluster) {
			out := runIn(ctx, t, cluster, helm, "test", "driverset", "-n", "driverset-system")
			if !regexp.MustCompile(`(?m)^Phase:\s+Succeeded$`).MatchString(out) {
				t.Errorf("helm test printed no Phase: Succeeded")
			}
		}
		installed(ctx, t, filepath.Base(charts[0]), install, test, pause, archive, pinned)
	})
}

// installed starts a test bed with one real node that has the released image (archive) and the
// pause image, installs driverset with install (the release's install.yaml applied, or its chart
// installed by the helm CLI), and checks that driverset's replicas are Ready on the pinned image
// and that its webhook converts an opted-in driver pod (the README's install check); then runs
// then, when given.
func installed(ctx context.Context, t *testing.T, what string, install func(context.Context, *testing.T, *testbed.Cluster) error,
	then func(context.Context, *testing.T, *testbed.Cluster), pause, archive, pinned string) {
	start := time.Now()
	cluster := startBed(ctx, t, []string{pause, archive})
	t.Logf("test bed with one real node up in %s", time.Since(start).Round(time.Second))

	start = time.Now()
	c := cluster.Client
	const ns = "driverset-system"
	// The namespace first (install.yaml has it: applying it again changes nothing; helm's
	// --create-namespace takes it as it is).
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := install(ctx, t, cluster); err != nil {
		t.Fatal(err)
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, "driverset", metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("%d/%d ready", d.Status.ReadyReplicas, *d.Spec.Replicas)
		// The node has the image only from the release's layout: a pull means it did not find it,
		// and no registry is reachable to end it.
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, p := range pods.Items {
				for _, cs := range p.Status.ContainerStatuses {
					if w := cs.State.Waiting; w != nil && strings.Contains(w.Reason, "Image") {
						return false, fmt.Errorf("pod %s: %s: %s", p.Name, w.Reason, w.Message)
					}
				}
			}
		}
		return d.Status.ReadyReplicas == *d.Spec.Replicas && d.Status.UpdatedReplicas == *d.Spec.Replicas, nil
	})
	if err != nil {
		t.Fatalf("driverset never became ready (%s): %v\n%s", last, err, testbed.PodsReport(ctx, c, ns))
	}
	t.Logf("driverset Ready from the release's %s in %s", what, time.Since(start).Round(time.Second))

	// The pods run the released image: the one install.yaml pins, which the node had only from
	// the release's layout (no registry is reachable here).
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		// The key-maker Job's pod (issue 35) runs the same image once, and ends.
		keyMaker := p.Labels["app.kubernetes.io/name"] == "driverset-make-seal-key"
		if keyMaker && p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("the key-maker's pod %s is %s, want Succeeded", p.Name, p.Status.Phase)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if keyMaker {
				t.Logf("pod %s on %s: the key-maker's container %s ran %s (image ID %s)", p.Name, p.Spec.NodeName, cs.Name, cs.Image, cs.ImageID)
				if cs.ImageID != pinned {
					t.Errorf("pod %s ran image ID %s (%s), want %s", p.Name, cs.ImageID, cs.Image, pinned)
				}
				continue
			}
			running++
			t.Logf("pod %s on %s: container %s runs %s (image ID %s)", p.Name, p.Spec.NodeName, cs.Name, cs.Image, cs.ImageID)
			// The image ID is the index's repo digest, as after a pull of the pinned reference
			// (the runtime reports the tag it also knows as the image).
			if cs.ImageID != pinned {
				t.Errorf("pod %s runs image ID %s (%s), want %s", p.Name, cs.ImageID, cs.Image, pinned)
			}
			if !cs.Ready {
				t.Errorf("pod %s: container %s not ready", p.Name, cs.Name)
			}
		}
		for _, ct := range p.Spec.Containers {
			if ct.Image != pinned {
				t.Errorf("pod %s: container %s names %s, want %s", p.Name, ct.Name, ct.Image, pinned)
			}
		}
	}
	if running < 2 {
		t.Errorf("%d containers of driverset run, want 2 replicas", running)
	}

	// The README's install check: a server-side dry-run of an opted-in driver comes back gated.
	if err := testbed.WaitConverts(ctx, c, "apache/spark", 2*time.Minute); err != nil {
		t.Fatalf("the driverset of the released %s: %v", what, err)
	}
	if then != nil {
		then(ctx, t, cluster)
	}
}

// startBed starts a test bed of one real node that has the images of archives, and stops it when
// t ends. Not in t.TempDir: a failed run keeps the test bed's logs there.
func startBed(ctx context.Context, t *testing.T, archives []string) *testbed.Cluster {
	t.Helper()
	bedDir, err := os.MkdirTemp("", "driverset-realrelease-")
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := testbed.Start(ctx, testbed.Options{
		Nodes: -1, RealNodes: 1, Images: archives, PauseImage: images.PauseName,
		Dir: filepath.Join(bedDir, "testbed"), Log: os.Stderr,
	})
	if err != nil {
		t.Fatalf("%v (logs in %s)", err, bedDir)
	}
	t.Cleanup(func() {
		if t.Failed() {
			cluster.KeepLogs()
		}
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("test bed logs kept in %s", bedDir)
		} else {
			_ = os.RemoveAll(bedDir)
		}
	})
	return cluster
}
