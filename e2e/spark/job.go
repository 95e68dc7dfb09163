package spark

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// jobSources are the JVM jobs, each a class of the default package in a file of its name.
//
//go:embed job/*.java
var jobSources embed.FS

// needs is the line by which a job's source names a jar that not every version has
// ("// driverset-job: needs spark-streaming" — DStreams, which 4.1.1 lacks): CompileJob leaves
// the job out where d's jars lack spark-streaming_<Scala>.
var needs = regexp.MustCompile(`(?m)^// driverset-job: needs ([a-z-]+)$`)

// CompileJob compiles the jobs (job/*.java) against d's jars with the host's JDK and returns
// their jar: DriversetPi (JobClass) and the streaming jobs (StreamClass, StreamStateClass, and
// DStreamClass where d HasDStreams).
func CompileJob(ctx context.Context, d Dist) ([]byte, error) {
	dir, err := os.MkdirTemp("", "driverset-pi-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	names, err := fs.Glob(jobSources, "job/*.java")
	if err != nil {
		return nil, err
	}
	var srcs []string
	for _, name := range names {
		src, err := jobSources.ReadFile(name)
		if err != nil {
			return nil, err
		}
		if m := needs.FindSubmatch(src); m != nil {
			has, err := d.hasJar(string(m[1]))
			if err != nil {
				return nil, err
			}
			if !has {
				continue
			}
		}
		p := filepath.Join(dir, filepath.Base(name))
		if err := os.WriteFile(p, src, 0o644); err != nil {
			return nil, err
		}
		srcs = append(srcs, p)
	}
	classes := filepath.Join(dir, "classes")
	jar := filepath.Join(dir, "job.jar")
	javac := append([]string{"javac", "--release", "17", "-nowarn", "-cp", filepath.Join(d.Home, "jars", "*"), "-d", classes}, srcs...)
	for _, args := range [][]string{
		javac,
		{"jar", "--create", "--file", jar, "-C", classes, "."},
	} {
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("spark: %s: %w\n%s", args[0], err, out.Bytes())
		}
	}
	return os.ReadFile(jar)
}

// HasDStreams says whether d's jars have Spark Streaming (DStreams), and so the job's jar
// DStreamClass: 3.5.6's do, 4.1.1's cannot (Maven Central has no spark-streaming_2.13 4.1.1).
func (d Dist) HasDStreams() (bool, error) { return d.hasJar("spark-streaming") }

// hasJar says whether d's jars have Spark's module artifact (spark-streaming_<Scala>-<v>.jar).
func (d Dist) hasJar(artifact string) (bool, error) {
	entries, err := os.ReadDir(filepath.Join(d.Home, "jars"))
	if err != nil {
		return false, err
	}
	prefix := artifact + "_" + d.Scala + "-"
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && strings.HasSuffix(e.Name(), ".jar") {
			return true, nil
		}
	}
	return false, nil
}
