//go:build testbed

package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/driverset/driverset/e2e/harness"
	"github.com/driverset/driverset/e2e/images"
	"github.com/driverset/driverset/e2e/spark"
)

// builtImages are the OCI archives every real node imports (no registry is reachable here), and
// the names the pods use.
type builtImages struct {
	archives                   []string
	pause, driverset, simspark string
	// spark are the real Spark versions the scenarios run (spark.ImageName names their images).
	spark []spark.Dist
}

// sparkVersionsEnv chooses the real Spark versions (space-separated); unset means every version
// of hack/spark-versions.env, "none" means none.
const sparkVersionsEnv = "DRIVERSET_SPARK_VERSIONS"

// buildImages compiles the pod sandbox's pause program, driverset and the simulated Spark
// entrypoint from this repository and packs each into an image archive in dir; then the real
// Spark images: Debian's JRE and Spark's jars (hack/spark-artifacts.sh, cached) with our
// entrypoint and the job, compiled here.
func buildImages(ctx context.Context, dir string, log func(format string, args ...any)) (builtImages, error) {
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
	dists, err := sparkDists(ctx)
	if err != nil {
		return b, err
	}
	for _, d := range dists {
		start := time.Now()
		job, err := spark.CompileJob(ctx, d)
		if err != nil {
			return b, err
		}
		path := filepath.Join(dir, "spark-"+d.Version+".tar")
		if _, err := images.WriteOCIArchiveFile(path, d.Image(job)); err != nil {
			return b, err
		}
		b.archives = append(b.archives, path)
		b.spark = append(b.spark, d)
		log("Spark %s image (job compiled, archive written) in %s", d.Version, time.Since(start).Round(time.Millisecond))
	}
	return b, nil
}

// sparkDists are the real Spark versions chosen by sparkVersionsEnv, fetched when not cached.
func sparkDists(ctx context.Context) ([]spark.Dist, error) {
	want := strings.Fields(os.Getenv(sparkVersionsEnv))
	if slices.Equal(want, []string{"none"}) {
		return nil, nil
	}
	root, err := harness.ModuleRoot()
	if err != nil {
		return nil, err
	}
	all, err := spark.Artifacts(ctx, root)
	if err != nil {
		return nil, err
	}
	if len(want) == 0 {
		return all, nil
	}
	var out []spark.Dist
	for _, v := range want {
		d, err := spark.Find(all, v)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}
