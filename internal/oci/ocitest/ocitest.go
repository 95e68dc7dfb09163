// Package ocitest reads OCI image layouts back for tests, failing the test on any broken
// reference: a blob whose content does not hash to its name, a descriptor whose size is wrong, a
// diff_id that is not its layer's. Its structures are written from the OCI image spec,
// independently of package oci's own types, so that a wrong JSON name in the writer fails the
// tests that read with them.
package ocitest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The OCI structures as the spec spells them.
type (
	Platform struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
	}
	Descriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Annotations map[string]string `json:"annotations"`
		Platform    *Platform         `json:"platform"`
	}
	Index struct {
		SchemaVersion int               `json:"schemaVersion"`
		MediaType     string            `json:"mediaType"`
		Manifests     []Descriptor      `json:"manifests"`
		Annotations   map[string]string `json:"annotations"`
	}
	Manifest struct {
		SchemaVersion int          `json:"schemaVersion"`
		MediaType     string       `json:"mediaType"`
		Config        Descriptor   `json:"config"`
		Layers        []Descriptor `json:"layers"`
	}
	RunConfig struct {
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		Env        []string          `json:"Env"`
		User       string            `json:"User"`
		WorkingDir string            `json:"WorkingDir"`
		Labels     map[string]string `json:"Labels"`
	}
	Config struct {
		Created      string    `json:"created"`
		Architecture string    `json:"architecture"`
		OS           string    `json:"os"`
		Config       RunConfig `json:"config"`
		RootFS       struct {
			Type    string   `json:"type"`
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
)

// Media types.
const (
	MediaIndex    = "application/vnd.oci.image.index.v1+json"
	MediaManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaConfig   = "application/vnd.oci.image.config.v1+json"
	MediaLayer    = "application/vnd.oci.image.layer.v1.tar"
	MediaLayerGz  = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// Layout is a layout read back: every file by name (in the order of the archive, for a tar), and
// index.json parsed. Order also has a tar's directory entries.
type Layout struct {
	Files map[string][]byte
	Order []string
	Index Index
}

// Image is one manifest read back, with its config and layers.
type Image struct {
	Manifest Manifest
	Config   Config
	Layers   [][]byte     // every layer's uncompressed bytes, bottom first
	Layer    []LayerEntry // the top layer, entry by entry
}

// LayerEntry is one entry of a layer's tar.
type LayerEntry struct {
	Name     string
	Type     byte
	Mode     os.FileMode
	UID, GID int
	Link     string
	Data     string
	ModTime  time.Time
}

// ReadTar reads a layout written as a tar archive.
func ReadTar(t testing.TB, b []byte) Layout {
	t.Helper()
	l := Layout{Files: map[string][]byte{}}
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
		l.Order = append(l.Order, h.Name)
		if h.Typeflag != tar.TypeDir {
			l.Files[h.Name] = data
		}
	}
	l.check(t)
	return l
}

// ReadDir reads a layout written as a directory.
func ReadDir(t testing.TB, dir string) Layout {
	t.Helper()
	l := Layout{Files: map[string][]byte{}}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		l.Files[filepath.ToSlash(rel)] = data
		l.Order = append(l.Order, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	l.check(t)
	return l
}

func (l *Layout) check(t testing.TB) {
	t.Helper()
	for name, data := range l.Files {
		hexDigest, ok := strings.CutPrefix(name, "blobs/sha256/")
		if !ok || hexDigest == "" {
			continue
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hexDigest {
			t.Errorf("blob %s holds content with digest %x", name, sum)
		}
	}
	if got := string(l.Files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %q", got)
	}
	Unmarshal(t, "index.json", l.Files["index.json"], &l.Index)
}

// Unmarshal is json.Unmarshal, failing t.
func Unmarshal(t testing.TB, what string, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Blob is the blob d names, checked against d's size.
func (l Layout) Blob(t testing.TB, d Descriptor) []byte {
	t.Helper()
	data, ok := l.Files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
	if !ok || !strings.HasPrefix(d.Digest, "sha256:") {
		t.Fatalf("descriptor %+v names no blob", d)
	}
	if int64(len(data)) != d.Size {
		t.Errorf("descriptor %s says size %d, blob has %d", d.Digest, d.Size, len(data))
	}
	return data
}

// Image reads the manifest d names, its config and its layers (gzip ones uncompressed), and
// checks the config's diff_ids against the uncompressed layers.
func (l Layout) Image(t testing.TB, d Descriptor) Image {
	t.Helper()
	var img Image
	if d.MediaType != MediaManifest {
		t.Errorf("descriptor %s has media type %q, want a manifest", d.Digest, d.MediaType)
	}
	Unmarshal(t, "manifest", l.Blob(t, d), &img.Manifest)
	if img.Manifest.Config.MediaType != MediaConfig {
		t.Errorf("config media type %q", img.Manifest.Config.MediaType)
	}
	Unmarshal(t, "config", l.Blob(t, img.Manifest.Config), &img.Config)
	if len(img.Manifest.Layers) == 0 {
		t.Fatal("manifest has no layers")
	}
	var diffIDs []string
	for _, ld := range img.Manifest.Layers {
		b := l.Blob(t, ld)
		switch ld.MediaType {
		case MediaLayer:
		case MediaLayerGz:
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("layer %s: %v", ld.Digest, err)
			}
			if b, err = io.ReadAll(zr); err != nil {
				t.Fatalf("layer %s: %v", ld.Digest, err)
			}
		default:
			t.Errorf("layer %s has media type %q", ld.Digest, ld.MediaType)
		}
		sum := sha256.Sum256(b)
		diffIDs = append(diffIDs, "sha256:"+hex.EncodeToString(sum[:]))
		img.Layers = append(img.Layers, b)
	}
	if !reflect.DeepEqual(img.Config.RootFS.DiffIDs, diffIDs) {
		t.Errorf("diff_ids = %v, want %v (the uncompressed layers' digests, in order)", img.Config.RootFS.DiffIDs, diffIDs)
	}
	lr := tar.NewReader(bytes.NewReader(img.Layers[len(img.Layers)-1]))
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
		img.Layer = append(img.Layer, LayerEntry{Name: h.Name, Type: h.Typeflag, Mode: h.FileInfo().Mode(),
			UID: h.Uid, GID: h.Gid, Link: h.Linkname, Data: string(data), ModTime: h.ModTime})
	}
	return img
}

// Archive is a single-image archive read back (what oci.WriteOCIArchive writes).
type Archive struct {
	Layout
	Image
}

// ReadArchive reads a single-image archive: index.json must name one manifest.
func ReadArchive(t testing.TB, b []byte) Archive {
	t.Helper()
	l := ReadTar(t, b)
	if len(l.Index.Manifests) != 1 {
		t.Fatalf("index has %d manifests, want 1", len(l.Index.Manifests))
	}
	return Archive{Layout: l, Image: l.Image(t, l.Index.Manifests[0])}
}
