// Command release builds a driverset release into a folder, without a container engine and
// without a registry (`make release VERSION=vX.Y.Z` runs it into dist/):
//
//   - image/ and driverset-<v>-image.oci.tar: driverset's image for linux/amd64 and linux/arm64,
//     an OCI image index in an OCI image layout (a folder, and the same as a tar), the layout's
//     reference name <v>; image-ref.txt: <repo>:<v>@sha256:<index digest>;
//   - driverset-<v>-linux-<arch>.spdx.json: an SPDX 2.3 SBOM of each image's binary, from the Go
//     build information in the binary itself (debug/buildinfo);
//   - install.yaml: hack/render-install.sh's install, its image pinned to the index's digest;
//   - driverset-<chart version>.tgz: the Helm chart, version and appVersion set, its default
//     image the released one, pinned to the same digest;
//   - kubectl-driverset_<v>_<os>_<arch>.tar.gz (.zip on windows): the kubectl plugin for linux,
//     darwin and windows on amd64 and arm64; driverset.yaml: the krew manifest naming them;
//   - SHA256SUMS: every other file, as sha256sum -c reads it.
//
// -platforms builds a subset of those platforms (the image for its linux ones, the plugin for
// each), for tests: `make test` checks a release of the host's linux platform alone, `make
// release-check` a whole one.
//
// Everything is reproducible: the same commit and Go toolchain give the same bytes (binaries
// built with -trimpath and no VCS stamp but the revision given, every timestamp
// SOURCE_DATE_EPOCH, archive entries sorted, owners root). hack/release's tests build a release
// twice and compare. docs/releasing.md says how a release is cut and pushed.
package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/driverset/driverset/internal/oci"
)

const module = "github.com/driverset/driverset"

// platform is a GOOS/GOARCH a release is built for.
type platform struct{ os, arch string }

func (p platform) String() string { return p.os + "/" + p.arch }

// releasePlatforms are what a release is built for, in the order its files and manifests list
// them: the plugin for each, the image for the linux ones.
var releasePlatforms = []platform{
	{"linux", "amd64"}, {"linux", "arm64"},
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"windows", "amd64"}, {"windows", "arm64"},
}

// selectPlatforms reads -platforms: "all" (or nothing) is every released platform; otherwise a
// comma-separated subset of them, at least one linux (the image needs it). The result keeps
// releasePlatforms' order whatever the list's, so that the same set gives the same bytes.
// A subset is for tests and quick local checks (the cross-compiles are most of a cold release's
// time); a release is cut with all of them.
func selectPlatforms(list string) ([]platform, error) {
	if list == "" || list == "all" {
		return releasePlatforms, nil
	}
	asked := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if !slices.ContainsFunc(releasePlatforms, func(p platform) bool { return p.String() == s }) {
			return nil, fmt.Errorf("platform %q: a release is built for %v (or all)", s, releasePlatforms)
		}
		if asked[s] {
			return nil, fmt.Errorf("platform %s named twice in %q", s, list)
		}
		asked[s] = true
	}
	var ps []platform
	for _, p := range releasePlatforms {
		if asked[p.String()] {
			ps = append(ps, p)
		}
	}
	if !slices.ContainsFunc(ps, isLinux) {
		return nil, fmt.Errorf("platforms %q: the image needs at least one linux platform", list)
	}
	return ps, nil
}

func isLinux(p platform) bool { return p.os == "linux" }

// options of one release.
type options struct {
	Root        string    // the module's root: what is built
	Out         string    // the release folder; made, must not hold anything
	Version     string    // vX.Y.Z[-pre]
	Revision    string    // the commit, stamped into the binaries
	Epoch       time.Time // SOURCE_DATE_EPOCH: every timestamp
	ImageRepo   string    // where the image will be pushed, e.g. ghcr.io/driverset/driverset
	DownloadURL string    // where the plugin archives will be downloaded from (the krew manifest)
	Platforms   string    // -platforms: "" or "all" (a release), or a subset (selectPlatforms)
	Log         func(format string, args ...any)
}

// result is what a release made.
type result struct {
	IndexDigest string // sha256:…
	ImageRef    string // repo:version@sha256:…
	Files       []string
}

// semver is what a release's VERSION must look like (the chart's version is it without the v).
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

func main() {
	var o options
	var epoch string
	var allowDirty bool
	flag.StringVar(&o.Out, "out", "dist", "the release folder (must be missing or empty)")
	flag.StringVar(&o.Version, "version", "", "the release's version, vX.Y.Z")
	flag.StringVar(&o.Revision, "revision", "", "the commit (default: git rev-parse HEAD)")
	flag.StringVar(&o.ImageRepo, "image-repo", "ghcr.io/driverset/driverset", "the repository the image will be pushed to")
	flag.StringVar(&o.DownloadURL, "download-url", "", "where the plugin archives will be downloaded from (default: the GitHub release of -version)")
	flag.StringVar(&epoch, "source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "every timestamp, in seconds (default: $SOURCE_DATE_EPOCH, else the commit's time)")
	flag.StringVar(&o.Platforms, "platforms", "all", "all, or a comma-separated subset of "+fmt.Sprint(releasePlatforms)+" for a partial build (tests; not a release)")
	flag.BoolVar(&allowDirty, "allow-dirty", false, "release from a tree with uncommitted changes (its revision then ends in -dirty)")
	flag.Parse()
	ctx := context.Background()
	start := time.Now()
	o.Log = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "release [%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	if err := fromGit(ctx, &o, epoch, allowDirty); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(2)
	}
	r, err := build(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	o.Log("done: %d files in %s; the image: %s", len(r.Files), o.Out, r.ImageRef)
}

// fromGit fills what the flags left to git: the root, the revision, the epoch.
func fromGit(ctx context.Context, o *options, epoch string, allowDirty bool) error {
	git := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "git", args...).Output()
		return strings.TrimSpace(string(out)), err
	}
	root, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		return fmt.Errorf("not in a git clone: %w", err)
	}
	o.Root = root
	if o.Revision == "" {
		if o.Revision, err = git("rev-parse", "HEAD"); err != nil {
			return err
		}
		dirty, err := git("status", "--porcelain", "--untracked-files=no")
		if err != nil {
			return err
		}
		if dirty != "" {
			if !allowDirty {
				return fmt.Errorf("the tree has uncommitted changes (commit them, or -allow-dirty):\n%s", dirty)
			}
			o.Revision += "-dirty"
		}
	}
	if epoch == "" {
		if epoch, err = git("log", "-1", "--format=%ct"); err != nil {
			return err
		}
	}
	s, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", epoch, err)
	}
	o.Epoch = time.Unix(s, 0).UTC()
	return nil
}

// build makes the release o describes.
func build(ctx context.Context, o options) (result, error) {
	var r result
	// A repository, with a registry's port maybe, but no tag or digest: render-install.sh and the
	// chart add those.
	if last := o.ImageRepo[strings.LastIndex(o.ImageRepo, "/")+1:]; last == "" || strings.ContainsAny(o.ImageRepo, "@ ") || strings.Contains(last, ":") {
		return r, fmt.Errorf("image repository %q: want a repository without tag or digest", o.ImageRepo)
	}
	if !semver.MatchString(o.Version) {
		return r, fmt.Errorf("VERSION %q is not vMAJOR.MINOR.PATCH[-PRERELEASE] (make release VERSION=v0.1.0)", o.Version)
	}
	platforms, err := selectPlatforms(o.Platforms)
	if err != nil {
		return r, err
	}
	if o.DownloadURL == "" {
		o.DownloadURL = "https://github.com/driverset/driverset/releases/download/" + o.Version
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return r, err
	}
	if entries, err := os.ReadDir(o.Out); err != nil || len(entries) > 0 {
		return r, fmt.Errorf("%s is not empty (make release removes dist/ first): %v", o.Out, err)
	}
	bins, err := os.MkdirTemp("", "driverset-release-")
	if err != nil {
		return r, err
	}
	defer func() { _ = os.RemoveAll(bins) }()

	if len(platforms) < len(releasePlatforms) {
		o.Log("only %v: not a whole release", platforms)
	}

	// The image, one manifest per linux platform under an index.
	var imgs []oci.Image
	var imagePlatforms []string
	for _, p := range slices.DeleteFunc(slices.Clone(platforms), func(p platform) bool { return !isLinux(p) }) {
		arch := p.arch
		imagePlatforms = append(imagePlatforms, p.String())
		path := filepath.Join(bins, "driverset-linux-"+arch)
		if err := goBuild(ctx, o, "./cmd/driverset", "linux", arch, path); err != nil {
			return r, err
		}
		bin, err := os.ReadFile(path)
		if err != nil {
			return r, err
		}
		o.Log("driverset for linux/%s built (%d bytes)", arch, len(bin))
		img := oci.Driverset(bin)
		img.Arch, img.Created, img.Gzip, img.Labels = arch, o.Epoch, true, imageAnnotations(o)
		imgs = append(imgs, img)
		sbom, err := spdx(o, path, "linux", arch)
		if err != nil {
			return r, err
		}
		if err := os.WriteFile(filepath.Join(o.Out, fmt.Sprintf("driverset-%s-linux-%s.spdx.json", o.Version, arch)), sbom, 0o644); err != nil {
			return r, err
		}
	}
	layout, digest, err := oci.IndexLayout(imgs, imageAnnotations(o))
	if err != nil {
		return r, err
	}
	r.IndexDigest = digest
	r.ImageRef = o.ImageRepo + ":" + o.Version + "@" + digest
	// The layout's reference name is the tag (skopeo copy oci:dist/image:<v>, oras cp
	// --from-oci-layout dist/image:<v>); containerd's name is the full reference (ctr images import).
	if err := layout.Tag(digest, map[string]string{
		oci.AnnotationRefName:        o.Version,
		oci.AnnotationContainerdName: o.ImageRepo + ":" + o.Version,
	}); err != nil {
		return r, err
	}
	if err := layout.WriteDir(filepath.Join(o.Out, "image")); err != nil {
		return r, err
	}
	var tarred bytes.Buffer
	if err := layout.WriteTar(&tarred); err != nil {
		return r, err
	}
	if err := os.WriteFile(filepath.Join(o.Out, "driverset-"+o.Version+"-image.oci.tar"), tarred.Bytes(), 0o644); err != nil {
		return r, err
	}
	if err := os.WriteFile(filepath.Join(o.Out, "image-ref.txt"), []byte(r.ImageRef+"\n"), 0o644); err != nil {
		return r, err
	}
	o.Log("image index %s (%s) in image/ and driverset-%s-image.oci.tar", digest, strings.Join(imagePlatforms, ", "), o.Version)

	// install.yaml, pinned to the index.
	cmd := exec.CommandContext(ctx, filepath.Join(o.Root, "hack", "render-install.sh"), filepath.Join(o.Out, "install.yaml"))
	cmd.Env = append(os.Environ(), "DRIVERSET_IMAGE="+r.ImageRef)
	if out, err := cmd.CombinedOutput(); err != nil {
		return r, fmt.Errorf("hack/render-install.sh: %w\n%s", err, out)
	}
	o.Log("install.yaml rendered for %s", r.ImageRef)

	chartName, err := packageChart(o, digest)
	if err != nil {
		return r, err
	}
	o.Log("chart packaged: %s", chartName)

	if err := plugins(ctx, o, platforms, bins); err != nil {
		return r, err
	}

	if err := checksums(o.Out); err != nil {
		return r, err
	}
	err = filepath.WalkDir(o.Out, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(o.Out, p)
			r.Files = append(r.Files, filepath.ToSlash(rel))
		}
		return err
	})
	return r, err
}

// imageAnnotations are the index's annotations and each image's labels.
func imageAnnotations(o options) map[string]string {
	return map[string]string{
		"org.opencontainers.image.created":  o.Epoch.Format(time.RFC3339),
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.source":   "https://" + module,
		"org.opencontainers.image.title":    "driverset",
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
}

// goBuild builds pkg for goos/goarch into out as the Dockerfile does: static (CGO_ENABLED=0),
// stripped, -trimpath, the version and revision stamped. -buildvcs=false: the revision is the
// stamp, so the binary does not depend on the state of the clone it is built in. GOWORK=off: the
// product's go.mod alone picks what it links, whatever go.work a developer keeps beside it.
func goBuild(ctx context.Context, o options, pkg, goos, goarch, out string) error {
	ld := "-s -w -X " + module + "/version.stamped=" + o.Version + " -X " + module + "/version.stampedRevision=" + o.Revision
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags="+ld, "-o", out, pkg)
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s/%s: %w\n%s", pkg, goos, goarch, err, b)
	}
	return nil
}

// spdx is an SPDX 2.3 JSON document of the Go binary at path: the binary itself (its sha256),
// the Go toolchain's standard library and every module the binary was linked from, read back
// from the build information Go records in the binary (debug/buildinfo), so it lists what was
// linked, not what go.mod requires.
func spdx(o options, path, goos, goarch string) ([]byte, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sbom: %s: %w", path, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	name := fmt.Sprintf("driverset-%s-%s-%s", o.Version, goos, goarch)
	type checksum struct {
		Algorithm string `json:"algorithm"`
		Value     string `json:"checksumValue"`
	}
	type ref struct {
		Category string `json:"referenceCategory"`
		Type     string `json:"referenceType"`
		Locator  string `json:"referenceLocator"`
	}
	type pkg struct {
		Name             string     `json:"name"`
		ID               string     `json:"SPDXID"`
		Version          string     `json:"versionInfo,omitempty"`
		Supplier         string     `json:"supplier,omitempty"`
		Download         string     `json:"downloadLocation"`
		FilesAnalyzed    bool       `json:"filesAnalyzed"`
		Checksums        []checksum `json:"checksums,omitempty"`
		LicenseConcluded string     `json:"licenseConcluded"`
		LicenseDeclared  string     `json:"licenseDeclared"`
		Copyright        string     `json:"copyrightText"`
		Purpose          string     `json:"primaryPackagePurpose,omitempty"`
		Comment          string     `json:"comment,omitempty"`
		ExternalRefs     []ref      `json:"externalRefs,omitempty"`
	}
	type rel struct {
		Element string `json:"spdxElementId"`
		Type    string `json:"relationshipType"`
		Related string `json:"relatedSpdxElement"`
	}
	purl := func(path, version string) []ref {
		return []ref{{"PACKAGE-MANAGER", "purl", "pkg:golang/" + path + "@" + version}}
	}
	var settings []string
	for _, s := range bi.Settings {
		settings = append(settings, s.Key+"="+s.Value)
	}
	bin := pkg{
		Name: "driverset", ID: "SPDXRef-Binary", Version: o.Version, Supplier: "Organization: driverset",
		Download: "https://" + module, Checksums: []checksum{{"SHA256", hex.EncodeToString(sum[:])}},
		LicenseConcluded: "Apache-2.0", LicenseDeclared: "Apache-2.0", Copyright: "NOASSERTION",
		Purpose: "APPLICATION", ExternalRefs: purl(bi.Path, o.Version),
		Comment: fmt.Sprintf("the binary /driverset of the image for %s/%s (%s, revision %s); built with %s: %s",
			goos, goarch, bi.Path, o.Revision, bi.GoVersion, strings.Join(settings, " ")),
	}
	pkgs := []pkg{bin, {
		Name: "stdlib", ID: "SPDXRef-Go-stdlib", Version: bi.GoVersion, Download: "https://go.dev/dl/",
		LicenseConcluded: "NOASSERTION", LicenseDeclared: "BSD-3-Clause", Copyright: "NOASSERTION",
		Purpose: "LIBRARY", ExternalRefs: purl("stdlib", bi.GoVersion), Comment: "the Go toolchain's standard library",
	}}
	rels := []rel{
		{"SPDXRef-DOCUMENT", "DESCRIBES", "SPDXRef-Binary"},
		{"SPDXRef-Binary", "DEPENDS_ON", "SPDXRef-Go-stdlib"},
	}
	bad := regexp.MustCompile(`[^A-Za-z0-9.-]+`)
	for i, d := range bi.Deps {
		m, comment := d, ""
		if d.Replace != nil {
			m, comment = d.Replace, "replaces "+d.Path+"@"+d.Version
		}
		id := fmt.Sprintf("SPDXRef-Go-%d-%s", i, bad.ReplaceAllString(m.Path, "-"))
		p := pkg{Name: m.Path, ID: id, Version: m.Version, Download: "https://proxy.golang.org/" + m.Path + "/@v/" + m.Version + ".zip",
			LicenseConcluded: "NOASSERTION", LicenseDeclared: "NOASSERTION", Copyright: "NOASSERTION",
			Purpose: "LIBRARY", ExternalRefs: purl(m.Path, m.Version), Comment: comment}
		if m.Sum != "" {
			p.Comment = strings.TrimPrefix(p.Comment+"; go.sum "+m.Sum, "; ")
		}
		pkgs = append(pkgs, p)
		rels = append(rels, rel{"SPDXRef-Binary", "DEPENDS_ON", id})
	}
	doc := map[string]any{
		"spdxVersion":       "SPDX-2.3",
		"dataLicense":       "CC0-1.0",
		"SPDXID":            "SPDXRef-DOCUMENT",
		"name":              name,
		"documentNamespace": "https://" + module + "/spdx/" + name + "-" + hex.EncodeToString(sum[:8]),
		"creationInfo": map[string]any{
			"created":  o.Epoch.Format(time.RFC3339),
			"creators": []string{"Tool: driverset-hack-release", "Organization: driverset"},
		},
		"packages":      pkgs,
		"relationships": rels,
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	return append(b, '\n'), err
}

// packageChart writes charts/driverset as driverset-<version without v>.tgz: the files Helm's
// own loader reads from the folder (.helmignore applied, symlinks followed), Chart.yaml's version
// and appVersion set, values.yaml's image.repository and image.digest set to the release's, in a
// tar sorted by name with fixed times and owners, gzip without a name or time.
func packageChart(o options, digest string) (string, error) {
	ch, err := loader.LoadDir(filepath.Join(o.Root, "charts", "driverset"))
	if err != nil {
		return "", fmt.Errorf("chart: %w", err)
	}
	chartVersion := strings.TrimPrefix(o.Version, "v")
	files := map[string][]byte{}
	for _, f := range ch.Raw {
		files[f.Name] = f.Data
	}
	// Each edit must hit exactly one line: a chart whose lines moved fails the release here,
	// instead of shipping the chart's defaults.
	edit := func(file, pattern, repl string) error {
		re := regexp.MustCompile(pattern)
		if n := len(re.FindAllIndex(files[file], -1)); n != 1 {
			return fmt.Errorf("chart: %s has %d lines matching %s, want 1 (the chart changed: update hack/release)", file, n, pattern)
		}
		files[file] = re.ReplaceAll(files[file], []byte(repl))
		return nil
	}
	for _, e := range [][3]string{
		{"Chart.yaml", `(?m)^version: .*$`, "version: " + chartVersion},
		{"Chart.yaml", `(?m)^appVersion: .*$`, "appVersion: " + strconv.Quote(o.Version)},
		{"values.yaml", `(?m)^  repository: driverset/driverset$`, "  repository: " + o.ImageRepo},
		{"values.yaml", `(?m)^  digest: ""$`, "  digest: " + strconv.Quote(digest)},
	} {
		if err := edit(e[0], e[1], e[2]); err != nil {
			return "", err
		}
	}
	var entries []entry
	for name, data := range files {
		entries = append(entries, entry{name: ch.Name() + "/" + name, data: data, mode: 0o644})
	}
	out := fmt.Sprintf("driverset-%s.tgz", chartVersion)
	b, err := tarGz(entries, o.Epoch)
	if err != nil {
		return "", err
	}
	return out, os.WriteFile(filepath.Join(o.Out, out), b, 0o644)
}

// entry is one file of an archive.
type entry struct {
	name string
	data []byte
	mode int64
}

// tarGz is a gzip'd tar of entries, sorted by name, every parent folder first, owned by root,
// mtime epoch; gzip at best compression with an empty header.
func tarGz(entries []entry, epoch time.Time) ([]byte, error) {
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	dirs := map[string]bool{}
	for _, e := range entries {
		var parents []string
		for d := filepath.ToSlash(filepath.Dir(e.name)); d != "." && !dirs[d]; d = filepath.ToSlash(filepath.Dir(d)) {
			parents = append([]string{d}, parents...)
			dirs[d] = true
		}
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: e.mode, Size: int64(len(e.data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// zipOf is a zip of entries, sorted, deflated, every time epoch.
func zipOf(entries []entry, epoch time.Time) ([]byte, error) {
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: epoch}
		h.SetMode(fs.FileMode(e.mode))
		w, err := zw.CreateHeader(h)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// plugins builds the kubectl plugin for each platform, archives each with the LICENSE, and
// writes the krew manifest naming each archive's URL and sha256.
func plugins(ctx context.Context, o options, platforms []platform, bins string) error {
	license, err := os.ReadFile(filepath.Join(o.Root, "LICENSE"))
	if err != nil {
		return err
	}
	var krew strings.Builder
	for _, p := range platforms {
		exe := "kubectl-driverset"
		if p.os == "windows" {
			exe += ".exe"
		}
		path := filepath.Join(bins, fmt.Sprintf("kubectl-driverset-%s-%s", p.os, p.arch))
		if err := goBuild(ctx, o, "./cmd/kubectl-driverset", p.os, p.arch, path); err != nil {
			return err
		}
		bin, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		entries := []entry{{name: exe, data: bin, mode: 0o755}, {name: "LICENSE", data: license, mode: 0o644}}
		name := fmt.Sprintf("kubectl-driverset_%s_%s_%s", o.Version, p.os, p.arch)
		var archive []byte
		if p.os == "windows" {
			name += ".zip"
			archive, err = zipOf(entries, o.Epoch)
		} else {
			name += ".tar.gz"
			archive, err = tarGz(entries, o.Epoch)
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(o.Out, name), archive, 0o644); err != nil {
			return err
		}
		sum := sha256.Sum256(archive)
		fmt.Fprintf(&krew, `  - selector:
      matchLabels:
        os: %s
        arch: %s
    uri: %s/%s
    sha256: %s
    bin: %s
    files:
      - from: %s
        to: .
      - from: LICENSE
        to: .
`, p.os, p.arch, strings.TrimSuffix(o.DownloadURL, "/"), name, hex.EncodeToString(sum[:]), exe, exe)
		o.Log("plugin for %s/%s: %s", p.os, p.arch, name)
	}
	manifest := fmt.Sprintf(`# The krew manifest of the kubectl driverset plugin, made by make release (hack/release).
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: driverset
spec:
  version: %s
  homepage: https://%s
  shortDescription: See and explain Spark drivers that driverset runs
  description: |
    driverset runs each opted-in Apache Spark driver as a StatefulSet of size one, so that it
    survives the loss of its node. This plugin shows a driver as driverset runs it: its pod, its
    node and incarnations (status), every decision driverset took about it (why), its logs
    across incarnations (logs), and whether driverset converts a driver pod here (check).
  caveats: |
    driverset itself must be installed in the cluster (see %s/blob/%s/docs/install.md).
  platforms:
%s`, o.Version, module, "https://"+module, o.Version, krew.String())
	return os.WriteFile(filepath.Join(o.Out, "driverset.yaml"), []byte(manifest), 0o644)
}

// checksums writes dir/SHA256SUMS: every other file below dir, by path, as sha256sum prints.
func checksums(dir string) error {
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "SHA256SUMS" {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		lines = append(lines, hex.EncodeToString(sum[:])+"  "+filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	if len(lines) == 0 {
		return errors.New("checksums: nothing to sum")
	}
	slices.SortFunc(lines, func(a, b string) int { return strings.Compare(a[66:], b[66:]) })
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}
