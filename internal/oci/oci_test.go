package oci

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/driverset/driverset/internal/oci/ocitest"
)

// readArchive reads an archive WriteOCIArchive wrote with ocitest's reader (the spec's structures,
// not the writer's), failing t on any broken reference.
func readArchive(t *testing.T, b []byte) ocitest.Archive {
	t.Helper()
	return ocitest.ReadArchive(t, b)
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

	m := a.Index.Manifests[0]
	if digest != m.Digest {
		t.Errorf("returned digest %s, index names %s", digest, m.Digest)
	}
	if m.MediaType != ocitest.MediaManifest || a.Manifest.MediaType != ocitest.MediaManifest || a.Index.MediaType != ocitest.MediaIndex {
		t.Errorf("media types: index %q, descriptor %q, manifest %q", a.Index.MediaType, m.MediaType, a.Manifest.MediaType)
	}
	wantAnn := map[string]string{"io.containerd.image.name": img.Name, "org.opencontainers.image.ref.name": img.Name}
	if !reflect.DeepEqual(m.Annotations, wantAnn) {
		t.Errorf("annotations = %v, want %v", m.Annotations, wantAnn)
	}
	if m.Platform == nil || m.Platform.OS != "linux" || m.Platform.Architecture != runtime.GOARCH {
		t.Errorf("platform = %+v", m.Platform)
	}
	if a.Manifest.SchemaVersion != 2 || a.Index.SchemaVersion != 2 {
		t.Errorf("schemaVersion: index %d manifest %d", a.Index.SchemaVersion, a.Manifest.SchemaVersion)
	}
	if a.Manifest.Config.MediaType != ocitest.MediaConfig || a.Manifest.Layers[0].MediaType != ocitest.MediaLayer {
		t.Errorf("config %q layer %q", a.Manifest.Config.MediaType, a.Manifest.Layers[0].MediaType)
	}
	c := a.Config
	if c.OS != "linux" || c.Architecture != runtime.GOARCH || c.RootFS.Type != "layers" {
		t.Errorf("config os %q arch %q rootfs %q", c.OS, c.Architecture, c.RootFS.Type)
	}
	want := ocitest.RunConfig{Entrypoint: img.Entrypoint, Cmd: img.Cmd, Env: img.Env, User: img.User, WorkingDir: img.WorkingDir}
	if !reflect.DeepEqual(c.Config, want) {
		t.Errorf("config.config = %+v, want %+v", c.Config, want)
	}
	// The blobs come before index.json, so a reader streaming the archive meets no dangling name.
	if last := a.Order[len(a.Order)-1]; last != "index.json" || a.Order[0] != "oci-layout" {
		t.Errorf("archive order %v", a.Order)
	}
}

func TestLayerEntries(t *testing.T) {
	a := readArchive(t, func() []byte { b, _ := writeArchive(t, sampleImage()); return b }())
	// Sorted by path; parents first, made 0755 root:root when not given; mtimes fixed.
	want := []ocitest.LayerEntry{
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
	if !reflect.DeepEqual(a.Layer, want) {
		t.Errorf("layer entries:\n got %+v\nwant %+v", a.Layer, want)
	}
}

func TestExplicitDirectoryWinsOverImplicitParent(t *testing.T) {
	img := Image{Name: "x.test/x:1", Files: []File{
		{Path: "/var/run/x", Mode: 0o600, Data: []byte("x")},
		{Path: "/var", Mode: os.ModeDir | 0o700, UID: 5, GID: 6},
	}}
	b, _ := writeArchive(t, img)
	var got []string
	for _, e := range readArchive(t, b).Layer {
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
	if len(a.Layers) != 3 {
		t.Fatalf("%d layers, want the 2 base layers and the Files layer", len(a.Layers))
	}
	for i, p := range bases {
		want, _ := os.ReadFile(p)
		if !bytes.Equal(a.Layers[i], want) {
			t.Errorf("layer %d is not %s byte for byte", i, p)
		}
	}
	if len(a.Layer) == 0 || a.Layer[len(a.Layer)-1].Name != "tmp/" && !strings.Contains(fmt.Sprint(a.Layer), "passwd") {
		t.Errorf("the top layer is not the image's Files: %+v", a.Layer)
	}

	img.BaseLayers = []string{filepath.Join(dir, "missing.tar")}
	if _, err := WriteOCIArchive(io.Discard, img); err == nil {
		t.Error("a missing base layer was accepted")
	}
}
