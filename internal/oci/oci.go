// Package oci writes OCI images without a container engine: one layer of files made here (from
// statically linked Go binaries and a few files), deterministic to the byte, as an OCI image
// layout, either a directory or a tar archive of one (what `ctr images import`, `skopeo copy
// oci:…`, `crane push` and `oras cp --from-oci-layout` read).
//
// Used by e2e/images (the test bed's images, imported into its real nodes) and by hack/release
// (driverset's released image, one manifest per platform under an image index). The same input
// always gives the same bytes, so the same digests.
package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// File is one entry of an image's single layer. Mode carries the type (os.ModeDir, os.ModeSymlink
// or none for a regular file) and the permission bits, setuid/setgid/sticky included.
type File struct {
	Path string // absolute or relative to the root; "/etc/passwd" and "etc/passwd" are the same
	Mode os.FileMode
	Data []byte // regular files only
	Link string // symlink target (Mode need not say os.ModeSymlink when Link is set)
	UID  int
	GID  int
}

// Image is a linux image: its files and its runtime config.
type Image struct {
	Name string // the reference containerd records, e.g. "driverset.test/driverset:e2e"
	// Arch is the image's GOARCH (its platform is linux/Arch); "" means runtime.GOARCH.
	Arch string
	// Created is the config's creation time and every layer entry's mtime; the zero time means
	// none in the config and the Unix epoch in the layer. A release sets SOURCE_DATE_EPOCH here.
	Created time.Time
	// Gzip compresses the Files layer (media type …tar+gzip; its diff_id stays the digest of the
	// uncompressed tar). Registries and every client take it; a push does not recompress it.
	Gzip bool
	// BaseLayers are uncompressed tar files laid down first, in order (a root file system made
	// elsewhere, say); they are streamed from disk, never held in memory.
	BaseLayers []string
	// Files is the top layer.
	Files      []File
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
	WorkingDir string
	// Labels are the config's labels (org.opencontainers.image.* and the like).
	Labels map[string]string
}

func (img Image) arch() string {
	if img.Arch != "" {
		return img.Arch
	}
	return runtime.GOARCH
}

// OCI media types and the annotations that name an image in an index.
const (
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar"
	mediaTypeLayerGz  = "application/vnd.oci.image.layer.v1.tar+gzip"

	// AnnotationContainerdName is the name `ctr images import` gives the image.
	AnnotationContainerdName = "io.containerd.image.name"
	// AnnotationRefName is the OCI layout's own reference name.
	AnnotationRefName = "org.opencontainers.image.ref.name"

	// modTimeUnix is every entry's mtime when Image.Created is zero: a fixed one makes the same
	// input give the same bytes.
	modTimeUnix = 0
)

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type ociIndex struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Manifests     []descriptor      `json:"manifests"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

type ociManifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type runConfig struct {
	User       string            `json:"User,omitempty"`
	Env        []string          `json:"Env,omitempty"`
	Entrypoint []string          `json:"Entrypoint,omitempty"`
	Cmd        []string          `json:"Cmd,omitempty"`
	WorkingDir string            `json:"WorkingDir,omitempty"`
	Labels     map[string]string `json:"Labels,omitempty"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type ociConfig struct {
	Created      string    `json:"created,omitempty"`
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	Config       runConfig `json:"config"`
	RootFS       rootFS    `json:"rootfs"`
}

// blob is content addressed by its sha256: data in memory, or the file at path.
type blob struct {
	mediaType string
	data      []byte
	path      string
	sum       string // hex sha256; computed once for a file
	size      int64
}

func memBlob(mediaType string, data []byte) blob {
	sum := sha256.Sum256(data)
	return blob{mediaType: mediaType, data: data, sum: hex.EncodeToString(sum[:]), size: int64(len(data))}
}

// fileBlob digests the file at path by reading it once.
func fileBlob(mediaType, path string) (blob, error) {
	f, err := os.Open(path)
	if err != nil {
		return blob{}, fmt.Errorf("oci: layer: %w", err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return blob{}, fmt.Errorf("oci: layer %s: %w", path, err)
	}
	return blob{mediaType: mediaType, path: path, sum: hex.EncodeToString(h.Sum(nil)), size: n}, nil
}

func (b blob) hex() string { return b.sum }

func (b blob) descriptor() descriptor {
	return descriptor{MediaType: b.mediaType, Digest: "sha256:" + b.sum, Size: b.size}
}

// writeTo writes the blob's bytes to w, checking that a file has not changed size.
func (b blob) writeTo(w io.Writer) error {
	if b.path == "" {
		_, err := w.Write(b.data)
		return err
	}
	f, err := os.Open(b.path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	n, err := io.Copy(w, io.LimitReader(f, b.size+1))
	if err == nil && n != b.size {
		err = fmt.Errorf("oci: layer %s changed while it was written", b.path)
	}
	return err
}

// Layout is an OCI image layout held in memory (its file blobs streamed from disk): the blobs,
// and index.json's entries. WriteDir and WriteTar write it.
type Layout struct {
	blobs   []blob
	byHex   map[string]blob
	entries []descriptor
}

func (l *Layout) add(b blob) {
	if l.byHex == nil {
		l.byHex = map[string]blob{}
	}
	if _, dup := l.byHex[b.hex()]; dup { // two identical layers are one blob
		return
	}
	l.byHex[b.hex()] = b
	l.blobs = append(l.blobs, b)
}

// Tag adds an entry to index.json for the manifest or image index digest ("sha256:<hex>", a blob
// of l) with those annotations (AnnotationRefName, AnnotationContainerdName). It does not change
// the digest of anything the layout names.
func (l *Layout) Tag(digest string, annotations map[string]string) error {
	b, ok := l.byHex[strings.TrimPrefix(digest, "sha256:")]
	if !ok || !strings.HasPrefix(digest, "sha256:") {
		return fmt.Errorf("oci: no blob %s in the layout", digest)
	}
	if b.mediaType != MediaTypeManifest && b.mediaType != MediaTypeIndex {
		return fmt.Errorf("oci: %s is a %s, not a manifest or an index", digest, b.mediaType)
	}
	d := b.descriptor()
	d.Annotations = annotations
	l.entries = append(l.entries, d)
	return nil
}

func (l *Layout) indexJSON() ([]byte, error) {
	return json.Marshal(ociIndex{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: l.entries})
}

var layoutFile = []byte(`{"imageLayoutVersion":"1.0.0"}`)

// WriteTar writes the layout as a tar archive: oci-layout, the blobs in the order they were
// added, index.json last (so that a reader streaming the archive has every blob index.json names).
// Every entry is root's, mode 0644 (directories 0755), mtime the Unix epoch.
func (l *Layout) WriteTar(w io.Writer) error {
	idx, err := l.indexJSON()
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	header := func(name string, size int64) *tar.Header {
		h := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size, ModTime: time.Unix(modTimeUnix, 0)}
		if strings.HasSuffix(name, "/") {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		}
		return h
	}
	if err := tw.WriteHeader(header("oci-layout", int64(len(layoutFile)))); err != nil {
		return err
	}
	if _, err := tw.Write(layoutFile); err != nil {
		return err
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(header(dir, 0)); err != nil {
			return err
		}
	}
	for _, b := range l.blobs {
		if err := tw.WriteHeader(header("blobs/sha256/"+b.hex(), b.size)); err != nil {
			return err
		}
		if err := b.writeTo(tw); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(header("index.json", int64(len(idx)))); err != nil {
		return err
	}
	if _, err := tw.Write(idx); err != nil {
		return err
	}
	return tw.Close()
}

// WriteDir writes the layout into dir (made if missing): dir/oci-layout, dir/blobs/sha256/<hex>,
// dir/index.json, files 0644.
func (l *Layout) WriteDir(dir string) error {
	idx, err := l.indexJSON()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		return err
	}
	write := func(name string, b blob) error {
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		err = b.writeTo(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	if err := write(filepath.Join(dir, "oci-layout"), blob{data: layoutFile}); err != nil {
		return err
	}
	for _, b := range l.blobs {
		if err := write(filepath.Join(dir, "blobs", "sha256", b.hex()), b); err != nil {
			return err
		}
	}
	return write(filepath.Join(dir, "index.json"), blob{data: idx})
}

// ReadLayoutDir reads the OCI layout in dir back (blobs stay on disk, each digested once): to
// tag it again or write it as a tar. Every blob's content is checked against its name.
func ReadLayoutDir(dir string) (*Layout, error) {
	b, err := os.ReadFile(filepath.Join(dir, "oci-layout"))
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(bytes.TrimSpace(b), layoutFile) {
		return nil, fmt.Errorf("oci: %s/oci-layout is %q", dir, b)
	}
	var idx ociIndex
	b, err = os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("oci: %s/index.json: %w", dir, err)
	}
	names, err := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if err != nil {
		return nil, err
	}
	l := &Layout{}
	for _, n := range names { // ReadDir sorts by name
		fb, err := fileBlob("", filepath.Join(dir, "blobs", "sha256", n.Name()))
		if err != nil {
			return nil, err
		}
		if fb.hex() != n.Name() {
			return nil, fmt.Errorf("oci: blob %s holds content of digest %s", n.Name(), fb.hex())
		}
		l.add(fb)
	}
	// Media types are known for what index.json names, and for what those name, recursively.
	var mark func(d descriptor) error
	mark = func(d descriptor) error {
		h := strings.TrimPrefix(d.Digest, "sha256:")
		b, ok := l.byHex[h]
		if !ok {
			return fmt.Errorf("oci: %s names %s, which is not in the layout", dir, d.Digest)
		}
		b.mediaType = d.MediaType
		l.byHex[h] = b
		for i := range l.blobs {
			if l.blobs[i].hex() == h {
				l.blobs[i].mediaType = d.MediaType
			}
		}
		if d.MediaType != MediaTypeIndex && d.MediaType != MediaTypeManifest {
			return nil
		}
		data, err := os.ReadFile(b.path)
		if err != nil {
			return err
		}
		var children struct {
			Manifests []descriptor `json:"manifests"`
			Config    *descriptor  `json:"config"`
			Layers    []descriptor `json:"layers"`
		}
		if err := json.Unmarshal(data, &children); err != nil {
			return fmt.Errorf("oci: %s: %w", d.Digest, err)
		}
		kids := slices.Concat(children.Manifests, children.Layers)
		if children.Config != nil {
			kids = append(kids, *children.Config)
		}
		for _, k := range kids {
			if err := mark(k); err != nil {
				return err
			}
		}
		return nil
	}
	for _, d := range idx.Manifests {
		if err := mark(d); err != nil {
			return nil, err
		}
	}
	l.entries = idx.Manifests
	return l, nil
}

// addImage adds img's layers, config and manifest to l and returns the manifest's descriptor,
// its platform set.
func (l *Layout) addImage(img Image) (descriptor, error) {
	layerData, err := layer(img.Files, img.Created)
	if err != nil {
		return descriptor{}, err
	}
	var layers []blob
	var diffIDs []string
	for _, p := range img.BaseLayers {
		b, err := fileBlob(mediaTypeLayer, p)
		if err != nil {
			return descriptor{}, err
		}
		layers = append(layers, b)
		diffIDs = append(diffIDs, b.descriptor().Digest) // uncompressed: its digest is its diff_id
	}
	top := memBlob(mediaTypeLayer, layerData)
	diffIDs = append(diffIDs, top.descriptor().Digest)
	if img.Gzip {
		var gz bytes.Buffer
		zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression) // header: no name, no mtime
		if err != nil {
			return descriptor{}, err
		}
		if _, err := zw.Write(layerData); err != nil {
			return descriptor{}, err
		}
		if err := zw.Close(); err != nil {
			return descriptor{}, err
		}
		top = memBlob(mediaTypeLayerGz, gz.Bytes())
	}
	layers = append(layers, top)
	var layerDescs []descriptor
	for _, b := range layers {
		layerDescs = append(layerDescs, b.descriptor())
	}
	c := ociConfig{
		Architecture: img.arch(),
		OS:           "linux",
		Config: runConfig{User: img.User, Env: img.Env, Entrypoint: img.Entrypoint, Cmd: img.Cmd,
			WorkingDir: img.WorkingDir, Labels: img.Labels},
		RootFS: rootFS{Type: "layers", DiffIDs: diffIDs},
	}
	if !img.Created.IsZero() {
		c.Created = img.Created.UTC().Format(time.RFC3339)
	}
	cfg, err := json.Marshal(c)
	if err != nil {
		return descriptor{}, err
	}
	cfgBlob := memBlob(mediaTypeConfig, cfg)
	man, err := json.Marshal(ociManifest{SchemaVersion: 2, MediaType: MediaTypeManifest,
		Config: cfgBlob.descriptor(), Layers: layerDescs})
	if err != nil {
		return descriptor{}, err
	}
	manBlob := memBlob(MediaTypeManifest, man)
	for _, b := range layers {
		l.add(b)
	}
	l.add(cfgBlob)
	l.add(manBlob)
	d := manBlob.descriptor()
	d.Platform = &platform{Architecture: img.arch(), OS: "linux"}
	return d, nil
}

// ImageLayout is the layout of img alone: index.json names its manifest img.Name, for containerd
// and as the layout's reference name. It returns the manifest's digest.
func ImageLayout(img Image) (*Layout, string, error) {
	if img.Name == "" {
		return nil, "", errors.New("oci: the image has no name")
	}
	l := &Layout{}
	d, err := l.addImage(img)
	if err != nil {
		return nil, "", err
	}
	d.Annotations = map[string]string{AnnotationContainerdName: img.Name, AnnotationRefName: img.Name}
	l.entries = append(l.entries, d)
	return l, d.Digest, nil
}

// IndexLayout is one image for several platforms: a layout holding each of images (one per Arch)
// and an image index naming their manifests with their platforms, in the order given, with
// annotations. index.json names nothing: Tag the returned digest (the image index's) with the
// names it should have.
func IndexLayout(images []Image, annotations map[string]string) (*Layout, string, error) {
	if len(images) == 0 {
		return nil, "", errors.New("oci: an index of no image")
	}
	l := &Layout{}
	seen := map[string]bool{}
	var manifests []descriptor
	for _, img := range images {
		if seen[img.arch()] {
			return nil, "", fmt.Errorf("oci: two images for linux/%s", img.arch())
		}
		seen[img.arch()] = true
		d, err := l.addImage(img)
		if err != nil {
			return nil, "", err
		}
		manifests = append(manifests, d)
	}
	idx, err := json.Marshal(ociIndex{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: manifests, Annotations: annotations})
	if err != nil {
		return nil, "", err
	}
	b := memBlob(MediaTypeIndex, idx)
	l.add(b)
	return l, b.descriptor().Digest, nil
}

// WriteOCIArchive writes img to w as an OCI image layout in a tar archive, the form
// `ctr images import` reads: oci-layout, the blobs (one layer, the config, the manifest) and
// index.json naming the manifest img.Name for containerd. The same img always gives the same
// bytes. It returns the manifest's digest.
func WriteOCIArchive(w io.Writer, img Image) (digest string, err error) {
	l, digest, err := ImageLayout(img)
	if err != nil {
		return "", err
	}
	if err := l.WriteTar(w); err != nil {
		return "", err
	}
	return digest, nil
}

// WriteOCIArchiveFile is WriteOCIArchive into a new file at name (0644).
func WriteOCIArchiveFile(name string, img Image) (digest string, err error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return "", err
	}
	digest, err = WriteOCIArchive(f, img)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return digest, err
}

// layer is the tar of files: paths sorted (so every parent precedes its children), every missing
// parent directory added as root:root 0755, mtimes fixed (created, or the Unix epoch).
func layer(files []File, created time.Time) ([]byte, error) {
	mtime := time.Unix(modTimeUnix, 0)
	if !created.IsZero() {
		mtime = created
	}
	byPath := map[string]File{}
	for _, f := range files {
		p := strings.TrimPrefix(f.Path, "/")
		if p == "" || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
			return nil, fmt.Errorf("oci: bad path %q: want a clean path below the root", f.Path)
		}
		if _, dup := byPath[p]; dup {
			return nil, fmt.Errorf("oci: %s is given twice", f.Path)
		}
		switch {
		case f.Mode.Type()&^(os.ModeDir|os.ModeSymlink) != 0:
			return nil, fmt.Errorf("oci: %s: only regular files, directories and symlinks (mode %v)", f.Path, f.Mode)
		case f.Link != "" && (f.Mode.IsDir() || len(f.Data) > 0):
			return nil, fmt.Errorf("oci: %s: a symlink has neither data nor directory mode", f.Path)
		case f.Link == "" && f.Mode&os.ModeSymlink != 0:
			return nil, fmt.Errorf("oci: %s: symlink without a target", f.Path)
		case f.Mode.IsDir() && len(f.Data) > 0:
			return nil, fmt.Errorf("oci: %s: a directory has no data", f.Path)
		}
		f.Path = p
		byPath[p] = f
	}
	for p := range byPath {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if _, ok := byPath[dir]; !ok {
				byPath[dir] = File{Path: dir, Mode: os.ModeDir | 0o755}
			}
		}
	}
	paths := slices.Sorted(func(yield func(string) bool) {
		for p := range byPath {
			if !yield(p) {
				return
			}
		}
	})
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		f := byPath[p]
		if dir := path.Dir(p); dir != "." && !byPath[dir].Mode.IsDir() {
			return nil, fmt.Errorf("oci: %s is below %s, which is not a directory", p, dir)
		}
		h := &tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: tarMode(f.Mode), Uid: f.UID, Gid: f.GID,
			Size: int64(len(f.Data)), ModTime: mtime}
		switch {
		case f.Link != "":
			h.Typeflag, h.Linkname, h.Mode, h.Size = tar.TypeSymlink, f.Link, 0o777, 0
		case f.Mode.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, p+"/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarMode is m's permission bits with setuid, setgid and sticky as tar (and chmod) spell them.
func tarMode(m os.FileMode) int64 {
	mode := int64(m.Perm())
	if m&os.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}
