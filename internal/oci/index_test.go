package oci

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/driverset/driverset/internal/oci/ocitest"
)

func twoPlatforms() []Image {
	created := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	var imgs []Image
	for _, arch := range []string{"amd64", "arm64"} {
		img := Driverset([]byte("binary for " + arch))
		img.Arch, img.Created, img.Gzip = arch, created, true
		img.Labels = map[string]string{"org.opencontainers.image.version": "v1.2.3"}
		imgs = append(imgs, img)
	}
	return imgs
}

// TestIndexLayout writes a two-platform index as a directory and as a tar, reads both back with
// the spec's structures and checks each platform's manifest, config and gzip layer.
func TestIndexLayout(t *testing.T) {
	ann := map[string]string{"org.opencontainers.image.version": "v1.2.3"}
	l, digest, err := IndexLayout(twoPlatforms(), ann)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Tag(digest, map[string]string{AnnotationRefName: "v1.2.3"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := l.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	var tarred bytes.Buffer
	if err := l.WriteTar(&tarred); err != nil {
		t.Fatal(err)
	}
	fromDir, fromTar := ocitest.ReadDir(t, dir), ocitest.ReadTar(t, tarred.Bytes())
	if !reflect.DeepEqual(fromDir.Files, fromTar.Files) {
		t.Error("the directory and the tar hold different files")
	}
	if n := len(fromDir.Index.Manifests); n != 1 {
		t.Fatalf("index.json names %d, want the image index alone", n)
	}
	top := fromDir.Index.Manifests[0]
	if top.Digest != digest || top.MediaType != ocitest.MediaIndex || top.Annotations[AnnotationRefName] != "v1.2.3" {
		t.Errorf("index.json's entry %+v, want the index %s named v1.2.3", top, digest)
	}
	var ix ocitest.Index
	ocitest.Unmarshal(t, "image index", fromDir.Blob(t, top), &ix)
	if ix.MediaType != ocitest.MediaIndex || ix.SchemaVersion != 2 || !reflect.DeepEqual(ix.Annotations, ann) {
		t.Errorf("image index %+v", ix)
	}
	var archs []string
	for _, m := range ix.Manifests {
		if m.Platform == nil || m.Platform.OS != "linux" {
			t.Fatalf("manifest %s has platform %+v", m.Digest, m.Platform)
		}
		archs = append(archs, m.Platform.Architecture)
		img := fromDir.Image(t, m)
		c := img.Config
		if c.Architecture != m.Platform.Architecture || c.OS != "linux" || c.Created != "2026-12-05T10:00:00Z" {
			t.Errorf("%s: config arch %q os %q created %q", m.Platform.Architecture, c.Architecture, c.OS, c.Created)
		}
		if img.Manifest.Layers[0].MediaType != ocitest.MediaLayerGz {
			t.Errorf("layer media type %q, want gzip", img.Manifest.Layers[0].MediaType)
		}
		files := map[string]ocitest.LayerEntry{}
		for _, e := range img.Layer {
			files[e.Name] = e
			if !e.ModTime.Equal(time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)) {
				t.Errorf("%s: mtime %v, want Created", e.Name, e.ModTime)
			}
		}
		if got := files["driverset"].Data; got != "binary for "+m.Platform.Architecture {
			t.Errorf("%s: /driverset holds %q", m.Platform.Architecture, got)
		}
		if c.Config.User != "65532:65532" || c.Config.Labels["org.opencontainers.image.version"] != "v1.2.3" {
			t.Errorf("run config %+v", c.Config)
		}
	}
	if !reflect.DeepEqual(archs, []string{"amd64", "arm64"}) {
		t.Errorf("platforms %v", archs)
	}

	// The same input is the same index; another binary is another.
	_, again, err := IndexLayout(twoPlatforms(), ann)
	if err != nil || again != digest {
		t.Errorf("the same images made index %s, then %s (%v)", digest, again, err)
	}
	other := twoPlatforms()
	other[1].Files[len(other[1].Files)-1].Data = []byte("another arm64 binary")
	if _, d, _ := IndexLayout(other, ann); d == digest {
		t.Error("another arm64 binary, same index digest")
	}
	dup := twoPlatforms()
	dup[1].Arch = "amd64"
	if _, _, err := IndexLayout(dup, ann); err == nil {
		t.Error("two amd64 images were accepted")
	}
}

// TestReadLayoutDirTagsAgain reads a written layout back, names the index once more and writes it
// again: every blob is kept byte for byte and index.json gains the entry.
func TestReadLayoutDirTagsAgain(t *testing.T) {
	l, digest, err := IndexLayout(twoPlatforms(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Tag(digest, map[string]string{AnnotationRefName: "v1"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := l.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	back, err := ReadLayoutDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Tag(digest, map[string]string{AnnotationContainerdName: "reg.test/x@" + digest}); err != nil {
		t.Fatal(err)
	}
	if err := back.Tag("sha256:0000", nil); err == nil {
		t.Error("a digest not in the layout was tagged")
	}
	var buf bytes.Buffer
	if err := back.WriteTar(&buf); err != nil {
		t.Fatal(err)
	}
	got, want := ocitest.ReadTar(t, buf.Bytes()), ocitest.ReadDir(t, dir)
	for name, data := range want.Files {
		if name != "index.json" && !bytes.Equal(got.Files[name], data) {
			t.Errorf("%s changed", name)
		}
	}
	if len(got.Index.Manifests) != 2 || got.Index.Manifests[1].Digest != digest ||
		got.Index.Manifests[1].MediaType != ocitest.MediaIndex || got.Index.Manifests[1].Size != got.Index.Manifests[0].Size {
		t.Errorf("index.json %+v", got.Index.Manifests)
	}
	if _, err := ReadLayoutDir(filepath.Join(dir, "blobs")); err == nil {
		t.Error("a folder without oci-layout was read as a layout")
	}
}
