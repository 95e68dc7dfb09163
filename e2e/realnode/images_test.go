//go:build testbed

package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/driverset/driverset/e2e/images"
)

// builtImages are the OCI archives every real node imports (no registry is reachable here), and
// the names the pods use.
type builtImages struct {
	archives                   []string
	pause, driverset, simspark string
}

// buildImages compiles the pod sandbox's pause program, driverset and the simulated Spark
// entrypoint from this repository and packs each into an image archive in dir.
func buildImages(ctx context.Context, dir string) (builtImages, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return builtImages{}, err
	}
	b := builtImages{pause: images.PauseName, driverset: images.DriversetName, simspark: images.SimSparkName}
	for _, img := range []struct {
		pkg  string
		file string
		make func([]byte) images.Image
	}{
		{"./e2e/images/pause", "pause.tar", images.Pause},
		{"./cmd/driverset", "driverset.tar", images.Driverset},
		{"./e2e/cmd/simspark", "simspark.tar", images.SimSpark},
	} {
		bin, err := images.GoBinary(ctx, img.pkg)
		if err != nil {
			return b, fmt.Errorf("building %s: %w", img.pkg, err)
		}
		path := filepath.Join(dir, img.file)
		if _, err := images.WriteOCIArchiveFile(path, img.make(bin)); err != nil {
			return b, err
		}
		b.archives = append(b.archives, path)
	}
	return b, nil
}
