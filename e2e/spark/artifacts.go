package spark

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Dist is one Spark version as the artifacts script left it.
type Dist struct {
	Version string
	// Scala is the Scala version its jars are built for; Spark's launcher needs to be told
	// (SPARK_SCALA_VERSION) when it runs from a folder of jars.
	Scala string
	// Home is a Spark distribution for the host: jars/ and RELEASE (what Spark's launcher looks
	// for), usable as SPARK_HOME.
	Home string
	// Layer is the image layer with Home's content at /opt/spark.
	Layer string
	// JRE is the image's root file system layer (Debian with OpenJDK 17's JRE, python3, tini,
	// user spark).
	JRE string
	// Python is the image layer with PySpark's Python side at /opt/spark/python, or "" when this
	// version has none (PYSPARK_VERSIONS in hack/spark-versions.env).
	Python string
}

// Artifacts runs hack/spark-artifacts.sh from the module at root (a no-op once cached) and
// returns every Spark version it provides.
func Artifacts(ctx context.Context, root string) ([]Dist, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "spark-artifacts.sh"))
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("spark: hack/spark-artifacts.sh: %w\n%s", err, stderr.Bytes())
	}
	return parseArtifacts(out)
}

// parseArtifacts reads the script's report: "jre PATH", "spark VERSION SCALA HOME" and
// "pyspark VERSION LAYER" lines.
func parseArtifacts(out []byte) ([]Dist, error) {
	var jre string
	var dists []Dist
	python := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "jre":
			jre = f[1]
		case len(f) == 4 && f[0] == "spark":
			dists = append(dists, Dist{Version: f[1], Scala: f[2], Home: f[3], Layer: f[3] + "/layer.tar"})
		case len(f) == 3 && f[0] == "pyspark":
			python[f[1]] = f[2]
		default:
			return nil, fmt.Errorf("spark: unexpected line from hack/spark-artifacts.sh: %q", sc.Text())
		}
	}
	if jre == "" || len(dists) == 0 {
		return nil, fmt.Errorf("spark: hack/spark-artifacts.sh named no JRE or no Spark:\n%s", out)
	}
	for v := range python {
		if _, err := Find(dists, v); err != nil {
			return nil, fmt.Errorf("spark: PySpark %s has no Spark of its version", v)
		}
	}
	for i := range dists {
		dists[i].JRE = jre
		dists[i].Python = python[dists[i].Version]
		for _, p := range []string{jre, dists[i].Layer, filepath.Join(dists[i].Home, "RELEASE"), dists[i].Python} {
			if p == "" {
				continue
			}
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("spark: Spark %s: %w", dists[i].Version, err)
			}
		}
	}
	return dists, nil
}

// Find is the Dist of version in dists.
func Find(dists []Dist, version string) (Dist, error) {
	for _, d := range dists {
		if d.Version == version {
			return d, nil
		}
	}
	return Dist{}, fmt.Errorf("spark: version %s is not among the artifacts (hack/spark-versions.env)", version)
}
