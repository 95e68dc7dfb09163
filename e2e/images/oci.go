package images

import (
	"io"

	"github.com/driverset/driverset/internal/oci"
)

// The image writer lives in internal/oci, shared with hack/release (driverset's released image).
type (
	// File is one entry of an image's single layer (oci.File).
	File = oci.File
	// Image is a linux image: its files and its runtime config (oci.Image).
	Image = oci.Image
)

// Annotations that name an image in an archive's index.json.
const (
	AnnotationContainerdName = oci.AnnotationContainerdName
	AnnotationRefName        = oci.AnnotationRefName
)

// WriteOCIArchive writes img to w as an OCI image layout in a tar archive, the form
// `ctr images import` reads (oci.WriteOCIArchive). It returns the manifest's digest.
func WriteOCIArchive(w io.Writer, img Image) (digest string, err error) {
	return oci.WriteOCIArchive(w, img)
}

// WriteOCIArchiveFile is WriteOCIArchive into a new file at name (0644).
func WriteOCIArchiveFile(name string, img Image) (digest string, err error) {
	return oci.WriteOCIArchiveFile(name, img)
}
