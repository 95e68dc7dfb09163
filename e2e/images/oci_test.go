package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The OCI structures as the spec spells them, written here independently of the writer's own types
// so that a wrong JSON name in the writer fails the tests.
type (
	tDescriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Annotations map[string]string `json:"annotations"`
		Platform    *struct {
			Architecture string `json:"architecture"`
			OS           string `json:"os"`
		} `json:"platform"`
	}
	tIndex struct {
		SchemaVersion int           `json:"schemaVersion"`
		MediaType     string        `json:"mediaType"`
		Manifests     []tDescriptor `json:"manifests"`
	}
	tManifest struct {
		SchemaVersion int           `json:"schemaVersion"`
		MediaType     string        `json:"mediaType"`
		Config        tDescriptor   `json:"config"`
		Layers        []tDescriptor `json:"layers"`
	}
	tRunConfig struct {
		Entrypoint []string `json:"Entrypoint"`
		Cmd        []string `json:"Cmd"`
		Env        []string `json:"Env"`
		User       string   `json:"User"`
		WorkingDir string   `json:"WorkingDir"`
	}
	tConfig struct {
		Architecture string     `json:"architecture"`
		OS           string     `json:"os"`
		Config       tRunConfig `json:"config"`
		RootFS       struct {
			Type    string   `json:"type"`
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
)

const (
	tMediaIndex    = "application/vnd.oci.image.index.v1+json"
	tMediaManifest = "application/vnd.oci.image.manifest.v1+json"
	tMediaConfig   = "application/vnd.oci.image.config.v1+json"
	tMediaLayer    = "application/vnd.oci.image.layer.v1.tar"
)

// ociArchive is an archive read back: every file by name, plus the parsed index, manifest and
// config, each checked against its descriptor on the way.
type ociArchive struct {
	files    map[string][]byte
	order    []string
	index    tIndex
	manifest tManifest
	config   tConfig
	layers   [][]byte     // every layer's bytes, bottom first
	layer    []layerEntry // the top layer (Image.Files), entry by entry
}

type layerEntry struct {
	Name     string
	Type     byte
	Mode     os.FileMode
	UID, GID int
	Link     string
	Data     string
	ModTime  time.Time
}

// readArchive parses an archive WriteOCIArchive wrote, failing t on any broken reference: a blob
// whose content does not hash to its name, a descriptor whose size or digest is wrong, a diff_id
// that is not the layer's.
func readArchive(t *testing.T, b []byte) ociArchive {
	t.Helper()
	a := ociArchive{files: map[string][]byte{}}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		a.order = append(a.order, h.Name)
		a.files[h.Name] = data
	}
	for name, data := range a.files {
		hexDigest, ok := strings.CutPrefix(name, "blobs/sha256/")
		if !ok || hexDigest == "" {
			continue
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hexDigest {
			t.Errorf("blob %s holds content with digest %x", name, sum)
		}
	}
	if got := string(a.files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %q", got)
	}
	unmarshal := func(what string, data []byte, v any) {
		t.Helper()
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	unmarshal("index.json", a.files["index.json"], &a.index)
	if len(a.index.Manifests) != 1 {
		t.Fatalf("index has %d manifests, want 1", len(a.index.Manifests))
	}
	blob := func(d tDescriptor) []byte {
		t.Helper()
		data, ok := a.files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
		if !ok || !strings.HasPrefix(d.Digest, "sha256:") {
			t.Fatalf("descriptor %+v names no blob", d)
		}
		if int64(len(data)) != d.Size {
			t.Errorf("descriptor %s says size %d, blob has %d", d.Digest, d.Size, len(data))
		}
		return data
	}
	unmarshal("manifest", blob(a.index.Manifests[0]), &a.manifest)
	unmarshal("config", blob(a.manifest.Config), &a.config)
	if len(a.manifest.Layers) == 0 {
		t.Fatal("manifest has no layers")
	}
	var diffIDs []string
	for _, d := range a.manifest.Layers {
		if d.MediaType != tMediaLayer {
			t.Errorf("layer %s has media type %q", d.Digest, d.MediaType)
		}
		l := blob(d)
		sum := sha256.Sum256(l)
		diffIDs = append(diffIDs, "sha256:"+hex.EncodeToString(sum[:]))
		a.layers = append(a.layers, l)
	}
	if !reflect.DeepEqual(a.config.RootFS.DiffIDs, diffIDs) {
		t.Errorf("diff_ids = %v, want %v (the uncompressed layers' digests, in order)", a.config.RootFS.DiffIDs, diffIDs)
	}
	layer := a.layers[len(a.layers)-1] // the Files layer
	lr := tar.NewReader(bytes.NewReader(layer))
	for {
		h, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(lr)
		if err != nil {
			t.Fatal(err)
		}
		a.layer = append(a.layer, layerEntry{Name: h.Name, Type: h.Typeflag, Mode: h.FileInfo().Mode(),
			UID: h.Uid, GID: h.Gid, Link: h.Linkname, Data: string(data), ModTime: h.ModTime})
	}
	return a
}

func sampleImage() Image {
	return Image{
		Name: "driverset.test/sample:e2e",
		Files: []File{
			{Path: "/opt/app", Mode: 0o755, Data: []byte("binary"), UID: 185, GID: 186},
			{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0::/root:/sbin/nologin\n")},
			{Path: "/tmp", Mode: os.ModeDir | os.ModeSticky | 0o777},
			{Path: "opt/entrypoint.sh", Link: "/opt/app"},
		},
		Entrypoint: []string{"/opt/entrypoint.sh"},
		Cmd:        []string{"--help"},
		Env:        []string{"PATH=/bin"},
		User:       "185",
		WorkingDir: "/opt",
	}
}

func writeArchive(t *testing.T, img Image) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	digest, err := WriteOCIArchive(&buf, img)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), digest
}

func TestArchiveReferencesAndConfig(t *testing.T) {
	img := sampleImage()
	b, digest := writeArchive(t, img)
	a := readArchive(t, b)

	m := a.index.Manifests[0]
	if digest != m.Digest {
		t.Errorf("returned digest %s, index names %s", digest, m.Digest)
	}
	if m.MediaType != tMediaManifest || a.manifest.MediaType != tMediaManifest || a.index.MediaType != tMediaIndex {
		t.Errorf("media types: index %q, descriptor %q, manifest %q", a.index.MediaType, m.MediaType, a.manifest.MediaType)
	}
	wantAnn := map[string]string{"io.containerd.image.name": img.Name, "org.opencontainers.image.ref.name": img.Name}
	if !reflect.DeepEqual(m.Annotations, wantAnn) {
		t.Errorf("annotations = %v, want %v", m.Annotations, wantAnn)
	}
	if m.Platform == nil || m.Platform.OS != "linux" || m.Platform.Architecture != runtime.GOARCH {
		t.Errorf("platform = %+v", m.Platform)
	}
	if a.manifest.SchemaVersion != 2 || a.index.SchemaVersion != 2 {
		t.Errorf("schemaVersion: index %d manifest %d", a.index.SchemaVersion, a.manifest.SchemaVersion)
	}
	if a.manifest.Config.MediaType != tMediaConfig || a.manifest.Layers[0].MediaType != tMediaLayer {
		t.Errorf("config %q layer %q", a.manifest.Config.MediaType, a.manifest.Layers[0].MediaType)
	}
	c := a.config
	if c.OS != "linux" || c.Architecture != runtime.GOARCH || c.RootFS.Type != "layers" {
		t.Errorf("config os %q arch %q rootfs %q", c.OS, c.Architecture, c.RootFS.Type)
	}
	want := tRunConfig{Entrypoint: img.Entrypoint, Cmd: img.Cmd, Env: img.Env, User: img.User, WorkingDir: img.WorkingDir}
	if !reflect.DeepEqual(c.Config, want) {
		t.Errorf("config.config = %+v, want %+v", c.Config, want)
	}
	// The blobs come before index.json, so a reader streaming the archive meets no dangling name.
	if last := a.order[len(a.order)-1]; last != "index.json" || a.order[0] != "oci-layout" {
		t.Errorf("archive order %v", a.order)
	}
}

func TestLayerEntries(t *testing.T) {
	a := readArchive(t, func() []byte { b, _ := writeArchive(t, sampleImage()); return b }())
	// Sorted by path; parents first, made 0755 root:root when not given; mtimes fixed.
	want := []layerEntry{
		{Name: "etc/", Type: tar.TypeDir, Mode: os.ModeDir | 0o755},
		{Name: "etc/passwd", Type: tar.TypeReg, Mode: 0o644, Data: "root:x:0:0::/root:/sbin/nologin\n"},
		{Name: "opt/", Type: tar.TypeDir, Mode: os.ModeDir | 0o755},
		{Name: "opt/app", Type: tar.TypeReg, Mode: 0o755, UID: 185, GID: 186, Data: "binary"},
		{Name: "opt/entrypoint.sh", Type: tar.TypeSymlink, Mode: os.ModeSymlink | 0o777, Link: "/opt/app"},
		{Name: "tmp/", Type: tar.TypeDir, Mode: os.ModeDir | os.ModeSticky | 0o777},
	}
	for i := range want {
		want[i].ModTime = time.Unix(modTimeUnix, 0)
	}
	if !reflect.DeepEqual(a.layer, want) {
		t.Errorf("layer entries:\n got %+v\nwant %+v", a.layer, want)
	}
}

func TestExplicitDirectoryWinsOverImplicitParent(t *testing.T) {
	img := Image{Name: "x.test/x:1", Files: []File{
		{Path: "/var/run/x", Mode: 0o600, Data: []byte("x")},
		{Path: "/var", Mode: os.ModeDir | 0o700, UID: 5, GID: 6},
	}}
	b, _ := writeArchive(t, img)
	var got []string
	for _, e := range readArchive(t, b).layer {
		got = append(got, e.Name+" "+e.Mode.String())
	}
	want := []string{"var/ drwx------", "var/run/ drwxr-xr-x", "var/run/x -rw-------"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries %v, want %v", got, want)
	}
}

func TestArchiveIsDeterministic(t *testing.T) {
	img := sampleImage()
	first, d1 := writeArchive(t, img)
	// The same files in another order are the same image.
	reversed := img
	reversed.Files = nil
	for i := len(img.Files) - 1; i >= 0; i-- {
		reversed.Files = append(reversed.Files, img.Files[i])
	}
	for _, in := range []Image{img, reversed} {
		again, d2 := writeArchive(t, in)
		if !bytes.Equal(first, again) || d1 != d2 {
			t.Errorf("two writes of the same image differ (digests %s, %s)", d1, d2)
		}
	}
	other := sampleImage()
	other.Files[0].Data = []byte("binary2")
	if _, d3 := writeArchive(t, other); d3 == d1 {
		t.Error("different content, same digest")
	}
}

func TestArchiveRefusesBadInput(t *testing.T) {
	for name, img := range map[string]Image{
		"no name":          {Files: []File{{Path: "/a", Mode: 0o644}}},
		"empty path":       {Name: "x.test/x:1", Files: []File{{Path: "", Mode: 0o644}}},
		"root":             {Name: "x.test/x:1", Files: []File{{Path: "/", Mode: os.ModeDir | 0o755}}},
		"dot dot":          {Name: "x.test/x:1", Files: []File{{Path: "/a/../../b", Mode: 0o644}}},
		"unclean":          {Name: "x.test/x:1", Files: []File{{Path: "/a//b", Mode: 0o644}}},
		"twice":            {Name: "x.test/x:1", Files: []File{{Path: "/a", Mode: 0o644}, {Path: "a", Mode: 0o600}}},
		"dir with data":    {Name: "x.test/x:1", Files: []File{{Path: "/a", Mode: os.ModeDir | 0o755, Data: []byte("x")}}},
		"symlink, no link": {Name: "x.test/x:1", Files: []File{{Path: "/a", Mode: os.ModeSymlink | 0o777}}},
		"device":           {Name: "x.test/x:1", Files: []File{{Path: "/a", Mode: os.ModeDevice | 0o600}}},
		"file as parent":   {Name: "x.test/x:1", Files: []File{{Path: "/a", Mode: 0o644}, {Path: "/a/b", Mode: 0o644}}},
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			_, err := WriteOCIArchive(&buf, img)
			if err == nil {
				t.Fatal("accepted")
			}
			t.Log(err)
		})
	}
}

func TestBaseLayersComeFirstAndStreamFromDisk(t *testing.T) {
	dir := t.TempDir()
	var bases []string
	for i, content := range []string{"root file system", "jars"} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		if err := tw.WriteHeader(&tar.Header{Name: "f", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(content))}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(content))
		_ = tw.Close()
		p := filepath.Join(dir, fmt.Sprintf("base%d.tar", i))
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		bases = append(bases, p)
	}
	img := sampleImage()
	img.BaseLayers = bases
	b, _ := writeArchive(t, img)
	a := readArchive(t, b)
	if len(a.layers) != 3 {
		t.Fatalf("%d layers, want the 2 base layers and the Files layer", len(a.layers))
	}
	for i, p := range bases {
		want, _ := os.ReadFile(p)
		if !bytes.Equal(a.layers[i], want) {
			t.Errorf("layer %d is not %s byte for byte", i, p)
		}
	}
	if len(a.layer) == 0 || a.layer[len(a.layer)-1].Name != "tmp/" && !strings.Contains(fmt.Sprint(a.layer), "passwd") {
		t.Errorf("the top layer is not the image's Files: %+v", a.layer)
	}

	img.BaseLayers = []string{filepath.Join(dir, "missing.tar")}
	if _, err := WriteOCIArchive(io.Discard, img); err == nil {
		t.Error("a missing base layer was accepted")
	}
}
