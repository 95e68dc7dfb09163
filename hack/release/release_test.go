package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"sigs.k8s.io/yaml"

	"github.com/driverset/driverset/internal/oci/ocitest"
)

// moduleRoot is the folder of the product's go.mod, the repository's root: hack/release is a
// module of its own (its go.mod holds helm), and its go.mod's replace names the product's folder.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", module, err)
	}
	return strings.TrimSpace(string(out))
}

// platformsEnv picks the platforms TestReleaseIsReproducibleAndComplete builds: unset, the
// host's linux platform alone (what `make test` pays for: two binaries, compiled as the host's
// other builds are); "all" in `make release-check`, every released platform (eight binaries,
// six of them cross-compiled: ten minutes and more with a cold build cache).
const platformsEnv = "DRIVERSET_RELEASE_PLATFORMS"

func testOptions(t *testing.T, out string) options {
	platforms := os.Getenv(platformsEnv)
	if platforms == "" {
		platforms = "linux/" + runtime.GOARCH
	}
	return options{
		Root: moduleRoot(t), Out: out, Version: "v1.2.3-rc.1", Revision: "0123456789abcdef0123456789abcdef01234567",
		Epoch: time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC), ImageRepo: "registry.test:5000/platform/driverset",
		DownloadURL: "https://downloads.test/driverset/v1.2.3-rc.1", Platforms: platforms, Log: t.Logf,
	}
}

// testPlatforms are the platforms o asks for.
func testPlatforms(t *testing.T, o options) []platform {
	t.Helper()
	ps, err := selectPlatforms(o.Platforms)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// TestReleaseIsReproducibleAndComplete builds a release twice into two folders and compares them
// byte for byte, then reads every artifact back: the image index and each of its platforms, the
// install and the chart pinned to the index's digest, the SBOMs, the plugin archives against the
// krew manifest, and SHA256SUMS against the files. In `make test` for the host's linux platform
// alone; `make release-check` runs it for every released platform (platformsEnv).
func TestReleaseIsReproducibleAndComplete(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a release twice")
	}
	o := testOptions(t, "")
	platforms := testPlatforms(t, o)
	t.Logf("platforms: %v (%s=all for every released one)", platforms, platformsEnv)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	start := time.Now()
	ra, err := build(ctx, testOptions(t, a))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first release in %s", time.Since(start).Round(time.Second))
	start = time.Now()
	rb, err := build(ctx, testOptions(t, b))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second release in %s", time.Since(start).Round(time.Second))

	// Reproducible: the same files, the same bytes.
	if !reflect.DeepEqual(ra, rb) {
		t.Errorf("two releases of the same tree differ:\n%+v\n%+v", ra, rb)
	}
	for _, f := range ra.Files {
		x, err1 := os.ReadFile(filepath.Join(a, f))
		y, err2 := os.ReadFile(filepath.Join(b, f))
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two builds (%v, %v)", f, err1, err2)
		}
	}
	o.Out = a
	want := []string{
		"SHA256SUMS", "driverset-1.2.3-rc.1.tgz", "driverset-v1.2.3-rc.1-image.oci.tar",
		"driverset.yaml", "image-ref.txt", "install.yaml",
	}
	for _, p := range platforms {
		if isLinux(p) {
			want = append(want, "driverset-v1.2.3-rc.1-linux-"+p.arch+".spdx.json")
		}
		ext := ".tar.gz"
		if p.os == "windows" {
			ext = ".zip"
		}
		want = append(want, "kubectl-driverset_v1.2.3-rc.1_"+p.os+"_"+p.arch+ext)
	}
	var top []string
	for _, f := range ra.Files {
		if !strings.HasPrefix(f, "image/") {
			top = append(top, f)
		}
	}
	slices.Sort(want)
	slices.Sort(top)
	if !slices.Equal(top, want) {
		t.Errorf("release files\n got %v\nwant %v", top, want)
	}

	bins := checkImage(t, a, ra.IndexDigest, o, platforms)
	checkSBOMs(t, a, bins, o)
	checkInstall(t, a, ra.IndexDigest, o)
	checkChart(t, a, ra.IndexDigest, o)
	checkPlugins(t, a, o, platforms)
	checkSums(t, a, ra.Files)
}

// checkImage reads the layout folder and the tar: one index named for the version, one manifest
// for each linux platform of the release, in its order, each a static non-root /driverset of its
// architecture. It returns each architecture's /driverset.
func checkImage(t *testing.T, out, digest string, o options, platforms []platform) map[string][]byte {
	t.Helper()
	l := ocitest.ReadDir(t, filepath.Join(out, "image"))
	tarred, err := os.ReadFile(filepath.Join(out, "driverset-"+o.Version+"-image.oci.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if lt := ocitest.ReadTar(t, tarred); !reflect.DeepEqual(lt.Files, l.Files) {
		t.Error("the image's tar and its folder hold different files")
	}
	if len(l.Index.Manifests) != 1 {
		t.Fatalf("index.json names %d, want 1", len(l.Index.Manifests))
	}
	top := l.Index.Manifests[0]
	if top.Digest != digest || top.MediaType != ocitest.MediaIndex || top.Annotations["org.opencontainers.image.ref.name"] != o.Version ||
		top.Annotations["io.containerd.image.name"] != o.ImageRepo+":"+o.Version {
		t.Errorf("index.json's entry %+v; want the index %s named %s", top, digest, o.Version)
	}
	ref, _ := os.ReadFile(filepath.Join(out, "image-ref.txt"))
	if got := strings.TrimSpace(string(ref)); got != o.ImageRepo+":"+o.Version+"@"+digest {
		t.Errorf("image-ref.txt = %q", got)
	}
	var ix ocitest.Index
	ocitest.Unmarshal(t, "image index", l.Blob(t, top), &ix)
	if ix.Annotations["org.opencontainers.image.revision"] != o.Revision || ix.Annotations["org.opencontainers.image.created"] != "2026-12-05T12:00:00Z" {
		t.Errorf("index annotations %v", ix.Annotations)
	}
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	bins := map[string][]byte{}
	var seen, want []string
	for _, m := range ix.Manifests {
		if m.Platform == nil || m.Platform.OS != "linux" {
			t.Fatalf("manifest %s: platform %+v", m.Digest, m.Platform)
		}
		arch := m.Platform.Architecture
		seen = append(seen, "linux/"+arch)
		img := l.Image(t, m)
		c := img.Config
		if c.Architecture != arch || c.Config.User != "65532:65532" || !slices.Equal(c.Config.Entrypoint, []string{"/driverset"}) ||
			c.Created != "2026-12-05T12:00:00Z" {
			t.Errorf("%s: config %+v", arch, c)
		}
		files := map[string]ocitest.LayerEntry{}
		for _, e := range img.Layer {
			files[e.Name] = e
		}
		if !strings.Contains(files["etc/passwd"].Data, "nonroot:x:65532:65532:") || files["tmp/"].Mode.Perm() != 0o777 {
			t.Errorf("%s: no nonroot user or no /tmp", arch)
		}
		d := files["driverset"]
		f, err := elf.NewFile(strings.NewReader(d.Data))
		if err != nil {
			t.Fatalf("%s: /driverset: %v", arch, err)
		}
		if f.Machine != machine[arch] || d.Mode.Perm() != 0o755 {
			t.Errorf("%s: /driverset is for %v, mode %v", arch, f.Machine, d.Mode)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s: /driverset is dynamically linked", arch)
			}
		}
		bins[arch] = []byte(d.Data)
	}
	for _, p := range platforms {
		if isLinux(p) {
			want = append(want, p.String())
		}
	}
	if !slices.Equal(seen, want) {
		t.Errorf("the index's platforms %v, want %v", seen, want)
	}
	return bins
}

// checkSBOMs: each SBOM describes the binary in the image (its sha256) and lists the modules it
// links (controller-runtime, at go.mod's version) and none it does not (helm, a test dependency).
func checkSBOMs(t *testing.T, out string, bins map[string][]byte, o options) {
	t.Helper()
	// The product's go.mod, not this module's, says which version the binary links.
	list := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "sigs.k8s.io/controller-runtime")
	list.Dir, list.Env = o.Root, append(os.Environ(), "GOWORK=off")
	crVersion, err := list.Output()
	if err != nil {
		t.Fatal(err)
	}
	for arch, bin := range bins {
		b, err := os.ReadFile(filepath.Join(out, "driverset-"+o.Version+"-linux-"+arch+".spdx.json"))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			SPDXVersion string `json:"spdxVersion"`
			Packages    []struct {
				Name      string `json:"name"`
				ID        string `json:"SPDXID"`
				Version   string `json:"versionInfo"`
				Checksums []struct {
					Algorithm string `json:"algorithm"`
					Value     string `json:"checksumValue"`
				} `json:"checksums"`
			} `json:"packages"`
			Relationships []struct {
				Element, Type, Related string
			} `json:"relationships"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(bin)
		got := map[string]string{}
		for _, p := range doc.Packages {
			got[p.Name] = p.Version
			if p.ID == "SPDXRef-Binary" && (len(p.Checksums) != 1 || p.Checksums[0].Value != hex.EncodeToString(sum[:])) {
				t.Errorf("%s: the SBOM's binary has checksums %+v, the image's /driverset %x", arch, p.Checksums, sum)
			}
		}
		if doc.SPDXVersion != "SPDX-2.3" || got["driverset"] != o.Version ||
			got["sigs.k8s.io/controller-runtime"] != strings.TrimSpace(string(crVersion)) || got["stdlib"] == "" {
			t.Errorf("%s: SBOM %s, packages driverset=%q controller-runtime=%q (go.mod: %s) stdlib=%q", arch, doc.SPDXVersion,
				got["driverset"], got["sigs.k8s.io/controller-runtime"], crVersion, got["stdlib"])
		}
		if _, linked := got["helm.sh/helm/v3"]; linked {
			t.Errorf("%s: the SBOM lists helm, which the binary does not link", arch)
		}
	}
}

// checkInstall: every image install.yaml names is the index, by digest.
func checkInstall(t *testing.T, out, digest string, o options) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if img, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "image: "); ok {
			n++
			if img != o.ImageRepo+"@"+digest {
				t.Errorf("install.yaml names image %s, want %s@%s", img, o.ImageRepo, digest)
			}
		}
	}
	if n == 0 {
		t.Error("install.yaml names no image")
	}
}

// checkChart loads the packaged chart as Helm does, and renders it: its version, its appVersion,
// and the Deployment's image the index by digest.
func checkChart(t *testing.T, out, digest string, o options) {
	t.Helper()
	ch, err := loader.Load(filepath.Join(out, "driverset-1.2.3-rc.1.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != "1.2.3-rc.1" || ch.Metadata.AppVersion != o.Version {
		t.Errorf("chart version %q appVersion %q", ch.Metadata.Version, ch.Metadata.AppVersion)
	}
	vals, err := chartutil.ToRenderValues(ch, nil, chartutil.ReleaseOptions{Name: "driverset", Namespace: "driverset-system", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	dep := files["driverset/templates/deployment.yaml"]
	if !strings.Contains(dep, "image: "+o.ImageRepo+"@"+digest) && !strings.Contains(dep, `image: "`+o.ImageRepo+"@"+digest+`"`) {
		t.Errorf("the chart's Deployment does not run %s@%s:\n%s", o.ImageRepo, digest, dep)
	}
	// The symlinked files (the alerts, the dashboard) are in the package with their content.
	for _, f := range ch.Files {
		if strings.HasPrefix(f.Name, "files/") && len(f.Data) == 0 {
			t.Errorf("chart file %s is empty", f.Name)
		}
	}
}

// checkPlugins reads the krew manifest: the release's platforms and no other, each naming an
// archive of the release by its URL and sha256, holding the plugin built for that platform and
// the LICENSE.
func checkPlugins(t *testing.T, out string, o options, platforms []platform) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "driverset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct{ Name string }
		Spec       struct {
			Version   string `json:"version"`
			Platforms []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Bin    string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "driverset" || m.Spec.Version != o.Version {
		t.Errorf("krew manifest %s %s %s %s", m.APIVersion, m.Kind, m.Metadata.Name, m.Spec.Version)
	}
	var seen []string
	for _, p := range m.Spec.Platforms {
		goos, goarch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		seen = append(seen, goos+"/"+goarch)
		name := path.Base(p.URI)
		if p.URI != o.DownloadURL+"/"+name {
			t.Errorf("%s/%s: uri %s", goos, goarch, p.URI)
		}
		archive, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Errorf("%s/%s: %v", goos, goarch, err)
			continue
		}
		if sum := sha256.Sum256(archive); hex.EncodeToString(sum[:]) != p.SHA256 {
			t.Errorf("%s: krew says sha256 %s, the archive has %x", name, p.SHA256, sum)
		}
		files := unarchive(t, name, archive)
		if len(files) != 2 || len(files["LICENSE"]) == 0 {
			t.Errorf("%s holds %d files, want %s and LICENSE", name, len(files), p.Bin)
		}
		if got := binaryPlatform(t, files[p.Bin]); got != goos+"/"+goarch {
			t.Errorf("%s: %s is built for %s", name, p.Bin, got)
		}
	}
	var want []string
	for _, p := range platforms {
		want = append(want, p.String())
	}
	if !slices.Equal(seen, want) {
		t.Errorf("krew platforms %v, want %v", seen, want)
	}
}

func unarchive(t *testing.T, name string, b []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	if strings.HasSuffix(name, ".zip") {
		zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range zr.File {
			r, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			files[f.Name], _ = io.ReadAll(r)
			_ = r.Close()
		}
		return files
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			files[h.Name], _ = io.ReadAll(tr)
		}
	}
}

// binaryPlatform is the GOOS/GOARCH an executable is for, from its headers.
func binaryPlatform(t *testing.T, b []byte) string {
	t.Helper()
	r := bytes.NewReader(b)
	if f, err := elf.NewFile(r); err == nil {
		return map[elf.Machine]string{elf.EM_X86_64: "linux/amd64", elf.EM_AARCH64: "linux/arm64"}[f.Machine]
	}
	if f, err := macho.NewFile(r); err == nil {
		return map[macho.Cpu]string{macho.CpuAmd64: "darwin/amd64", macho.CpuArm64: "darwin/arm64"}[f.Cpu]
	}
	if f, err := pe.NewFile(r); err == nil {
		return map[uint16]string{pe.IMAGE_FILE_MACHINE_AMD64: "windows/amd64", pe.IMAGE_FILE_MACHINE_ARM64: "windows/arm64"}[f.Machine]
	}
	return "unknown"
}

// checkSums: SHA256SUMS names every other file of the release once, each with its sha256.
func checkSums(t *testing.T, out string, files []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	for line := range strings.Lines(string(b)) {
		sum, name, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", line)
		}
		data, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Errorf("SHA256SUMS names %s: %v", name, err)
			continue
		}
		if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: SHA256SUMS says %s, the file has %x", name, sum, got)
		}
		named = append(named, name)
	}
	want := slices.DeleteFunc(slices.Clone(files), func(f string) bool { return f == "SHA256SUMS" })
	slices.Sort(want)
	if !slices.Equal(named, want) {
		t.Errorf("SHA256SUMS names\n%v\nthe release holds\n%v", named, want)
	}
	if sha256sum, err := exec.LookPath("sha256sum"); err == nil { // the tool a user runs, when here
		cmd := exec.Command(sha256sum, "--check", "--quiet", "--strict", "SHA256SUMS")
		cmd.Dir = out
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum --check: %v\n%s", err, b)
		}
	}
}

// TestReleaseRefuses: a version that is not SemVer, an image repository with a tag, a release
// folder that holds something; each refused before anything is built.
func TestReleaseRefuses(t *testing.T) {
	for name, edit := range map[string]func(o *options){
		"version without v":   func(o *options) { o.Version = "1.2.3" },
		"git describe":        func(o *options) { o.Version = "362854f-dirty" },
		"repository with tag": func(o *options) { o.ImageRepo = "registry.test/driverset:v1" },
		"repository digest":   func(o *options) { o.ImageRepo = "registry.test/driverset@sha256:00" },
		"unknown platform":    func(o *options) { o.Platforms = "linux/amd64,linux/386" },
		"platform twice":      func(o *options) { o.Platforms = "linux/amd64, linux/amd64" },
		"no linux platform":   func(o *options) { o.Platforms = "darwin/arm64,windows/amd64" },
		"folder not empty": func(o *options) {
			if err := os.WriteFile(filepath.Join(o.Out, "old"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			o := testOptions(t, t.TempDir())
			edit(&o)
			start := time.Now()
			if _, err := build(context.Background(), o); err == nil {
				t.Fatal("accepted")
			} else if d := time.Since(start); d > 5*time.Second {
				t.Errorf("refused only after %s: something was built first", d)
			} else {
				t.Log(err)
			}
		})
	}
	// A registry with a port is a repository without a tag.
	o := testOptions(t, t.TempDir())
	o.Version = "not a version" // checked right after the repository: stops the build there
	if _, err := build(context.Background(), o); err == nil || strings.Contains(err.Error(), "repository") {
		t.Errorf("registry.test:5000/… refused as a repository: %v", err)
	}
}

// TestSelectPlatforms: "all" and nothing are the six released platforms (what `make release`
// builds); a subset comes back in the release's order whatever the list's, so that the same set
// gives the same index and krew manifest.
func TestSelectPlatforms(t *testing.T) {
	for _, all := range []string{"", "all"} {
		ps, err := selectPlatforms(all)
		if err != nil || len(ps) != 6 || !slices.Equal(ps, releasePlatforms) {
			t.Errorf("selectPlatforms(%q) = %v, %v; want the six released platforms", all, ps, err)
		}
	}
	want := []platform{{"linux", "arm64"}, {"darwin", "amd64"}, {"windows", "arm64"}}
	ps, err := selectPlatforms("windows/arm64, linux/arm64,darwin/amd64")
	if err != nil || !slices.Equal(ps, want) {
		t.Errorf("got %v, %v; want %v", ps, err, want)
	}
}
