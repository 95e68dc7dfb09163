package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
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
}

// OCI media types and the annotations that name an image in an index.
const (
	mediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar"

	// AnnotationContainerdName is the name `ctr images import` gives the image.
	AnnotationContainerdName = "io.containerd.image.name"
	// AnnotationRefName is the OCI layout's own reference name.
	AnnotationRefName = "org.opencontainers.image.ref.name"

	// modTimeUnix is every entry's mtime: a fixed one makes the same input give the same bytes.
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
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

type ociManifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type runConfig struct {
	User       string   `json:"User,omitempty"`
	Env        []string `json:"Env,omitempty"`
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Cmd        []string `json:"Cmd,omitempty"`
	WorkingDir string   `json:"WorkingDir,omitempty"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type ociConfig struct {
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
		return blob{}, fmt.Errorf("images: layer: %w", err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return blob{}, fmt.Errorf("images: layer %s: %w", path, err)
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
		err = fmt.Errorf("images: layer %s changed while it was written", b.path)
	}
	return err
}

// WriteOCIArchive writes img to w as an OCI image layout in a tar archive, the form
// `ctr images import` reads: oci-layout, the blobs (one uncompressed layer, the config, the
// manifest) and index.json naming the manifest img.Name for containerd. The same img always gives
// the same bytes. It returns the manifest's digest.
func WriteOCIArchive(w io.Writer, img Image) (digest string, err error) {
	if img.Name == "" {
		return "", errors.New("images: the image has no name")
	}
	layerData, err := layer(img.Files)
	if err != nil {
		return "", err
	}
	var layers []blob
	for _, p := range img.BaseLayers {
		b, err := fileBlob(mediaTypeLayer, p)
		if err != nil {
			return "", err
		}
		layers = append(layers, b)
	}
	layers = append(layers, memBlob(mediaTypeLayer, layerData))
	// Uncompressed, so a layer's digest is its diff_id.
	var diffIDs []string
	var layerDescs []descriptor
	for _, l := range layers {
		diffIDs = append(diffIDs, l.descriptor().Digest)
		layerDescs = append(layerDescs, l.descriptor())
	}
	cfg, err := json.Marshal(ociConfig{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Config: runConfig{User: img.User, Env: img.Env, Entrypoint: img.Entrypoint, Cmd: img.Cmd,
			WorkingDir: img.WorkingDir},
		RootFS: rootFS{Type: "layers", DiffIDs: diffIDs},
	})
	if err != nil {
		return "", err
	}
	cfgBlob := memBlob(mediaTypeConfig, cfg)
	man, err := json.Marshal(ociManifest{SchemaVersion: 2, MediaType: mediaTypeManifest,
		Config: cfgBlob.descriptor(), Layers: layerDescs})
	if err != nil {
		return "", err
	}
	manBlob := memBlob(mediaTypeManifest, man)
	manDesc := manBlob.descriptor()
	manDesc.Annotations = map[string]string{AnnotationContainerdName: img.Name, AnnotationRefName: img.Name}
	manDesc.Platform = &platform{Architecture: runtime.GOARCH, OS: "linux"}
	idx, err := json.Marshal(ociIndex{SchemaVersion: 2, MediaType: mediaTypeIndex, Manifests: []descriptor{manDesc}})
	if err != nil {
		return "", err
	}
	// The index last, so that a reader streaming the archive has every blob the index names.
	blobs := slices.Concat(layers, []blob{cfgBlob, manBlob, {data: idx, size: int64(len(idx))}})

	tw := tar.NewWriter(w)
	header := func(name string, size int64) *tar.Header {
		h := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size, ModTime: time.Unix(modTimeUnix, 0)}
		if strings.HasSuffix(name, "/") {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		}
		return h
	}
	layout := []byte(`{"imageLayoutVersion":"1.0.0"}`)
	if err := tw.WriteHeader(header("oci-layout", int64(len(layout)))); err != nil {
		return "", err
	}
	if _, err := tw.Write(layout); err != nil {
		return "", err
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(header(dir, 0)); err != nil {
			return "", err
		}
	}
	written := map[string]bool{}
	for i, b := range blobs {
		name := "blobs/sha256/" + b.hex()
		if i == len(blobs)-1 {
			name = "index.json"
		}
		if written[name] { // two identical layers are one blob
			continue
		}
		written[name] = true
		if err := tw.WriteHeader(header(name, b.size)); err != nil {
			return "", err
		}
		if err := b.writeTo(tw); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	return manDesc.Digest, nil
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
// parent directory added as root:root 0755, mtimes fixed.
func layer(files []File) ([]byte, error) {
	byPath := map[string]File{}
	for _, f := range files {
		p := strings.TrimPrefix(f.Path, "/")
		if p == "" || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
			return nil, fmt.Errorf("images: bad path %q: want a clean path below the root", f.Path)
		}
		if _, dup := byPath[p]; dup {
			return nil, fmt.Errorf("images: %s is given twice", f.Path)
		}
		switch {
		case f.Mode.Type()&^(os.ModeDir|os.ModeSymlink) != 0:
			return nil, fmt.Errorf("images: %s: only regular files, directories and symlinks (mode %v)", f.Path, f.Mode)
		case f.Link != "" && (f.Mode.IsDir() || len(f.Data) > 0):
			return nil, fmt.Errorf("images: %s: a symlink has neither data nor directory mode", f.Path)
		case f.Link == "" && f.Mode&os.ModeSymlink != 0:
			return nil, fmt.Errorf("images: %s: symlink without a target", f.Path)
		case f.Mode.IsDir() && len(f.Data) > 0:
			return nil, fmt.Errorf("images: %s: a directory has no data", f.Path)
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
			return nil, fmt.Errorf("images: %s is below %s, which is not a directory", p, dir)
		}
		h := &tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: tarMode(f.Mode), Uid: f.UID, Gid: f.GID,
			Size: int64(len(f.Data)), ModTime: time.Unix(modTimeUnix, 0)}
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
