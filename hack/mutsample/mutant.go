package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// status is what the tests did to a mutant.
type status string

const (
	killed    status = "KILLED"
	timedOut  status = "TIMED OUT" // counted as killed, as gremlins does, and listed
	lived     status = "LIVED"
	notViable status = "NOT VIABLE" // did not build; not in the score
)

// mutate returns src with the site's token replaced.
func mutate(src []byte, s site) ([]byte, error) {
	end := s.offset + len(s.old)
	if end > len(src) || string(src[s.offset:end]) != s.old {
		return nil, fmt.Errorf("%s:%d:%d: %q is not at offset %d", s.file, s.line, s.col, s.old, s.offset)
	}
	out := make([]byte, 0, len(src)-len(s.old)+len(s.new))
	out = append(out, src[:s.offset]...)
	out = append(out, s.new...)
	return append(out, src[end:]...), nil
}

// classify tells a mutant's status from the build of its test binary and the run of it: the
// error of each, and whether the timeout ended the run. The build has no timeout (it cannot
// loop, and on a loaded machine it is what takes long), so a timeout is the tests' own.
func classify(buildErr, runErr error, expired bool) status {
	switch {
	case buildErr != nil:
		return notViable
	case expired:
		return timedOut
	case runErr == nil:
		return lived
	default:
		return killed
	}
}

// run is how one command went.
type run struct {
	err     error         // the command's
	expired bool          // the timeout ended it
	output  string        // standard output and error
	took    time.Duration // wall time
}

// command runs name args... in dir, ended (with every process it started) after timeout; zero
// means no limit.
func command(ctx context.Context, dir string, timeout time.Duration, name string, args ...string) run {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	// A test binary may start processes of its own (wrap's tests re-exec it): end the whole
	// group, or a mutant that loops would run on.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	return run{err: err, expired: errors.Is(ctx.Err(), context.DeadlineExceeded), output: out.String(), took: time.Since(start)}
}

// buildTest builds the test binary of p into bin (go test -c), with extra flags.
func buildTest(ctx context.Context, moduleDir string, p *pkg, bin string, flags ...string) run {
	args := append(append([]string{"test", "-c", "-vet=off", "-o", bin}, flags...), "./"+p.arg)
	return command(ctx, moduleDir, 0, "go", args...)
}

// runMutant builds p's test binary with the site applied, through an overlay (the mutated file
// replaces the original in the build only; the module is not copied and the cache serves the
// rest), and runs it in p's folder, as go test does, stopping at the first failing test.
func runMutant(ctx context.Context, moduleDir, tmp string, p *pkg, s site, timeout time.Duration) (status, error) {
	src, err := mutate(p.sources[s.file], s)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(tmp, "mutant")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	mutated := filepath.Join(dir, filepath.Base(s.file))
	if err := os.WriteFile(mutated, src, 0o600); err != nil {
		return "", err
	}
	overlay, err := json.Marshal(map[string]map[string]string{
		"Replace": {filepath.Join(p.dir, filepath.Base(s.file)): mutated},
	})
	if err != nil {
		return "", err
	}
	overlayFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o600); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "mutant.test")
	build := buildTest(ctx, moduleDir, p, bin, "-overlay", overlayFile, "-ldflags=-w")
	var tests run
	if build.err == nil {
		tests = command(ctx, p.dir, timeout, bin, "-test.failfast")
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	return classify(build.err, tests.err, tests.expired), nil
}
