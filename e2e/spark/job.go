package spark

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

//go:embed job/DriversetPi.java
var jobSource []byte

// CompileJob compiles the job against d's jars with the host's JDK and returns its jar.
func CompileJob(ctx context.Context, d Dist) ([]byte, error) {
	dir, err := os.MkdirTemp("", "driverset-pi-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	src := filepath.Join(dir, JobClass+".java")
	if err := os.WriteFile(src, jobSource, 0o644); err != nil {
		return nil, err
	}
	classes := filepath.Join(dir, "classes")
	jar := filepath.Join(dir, "job.jar")
	for _, args := range [][]string{
		{"javac", "--release", "17", "-nowarn", "-cp", filepath.Join(d.Home, "jars", "*"), "-d", classes, src},
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
