package main

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
)

// The plugin is for every user's laptop: it must build for macOS and Windows, not only for the
// Linux that driverset's own binary runs on. It once did not (inspect → convert → wrap pulled in
// Linux's prctl and Pdeathsig for two constants).
func TestPluginBuildsForEveryUsersPlatform(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles the plugin")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to cross-compile with: %v", err)
	}
	// The six platforms hack/release builds the plugin for, but this machine's own (every build
	// and vet of the module compiles that one).
	for _, p := range []struct{ goos, goarch string }{
		{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"}, {"windows", "arm64"},
	} {
		if p.goos == runtime.GOOS && p.goarch == runtime.GOARCH {
			continue
		}
		t.Run(p.goos+"-"+p.goarch, func(t *testing.T) {
			cmd := exec.Command(gobin, "build", "-o", os.DevNull, ".")
			cmd.Env = append(os.Environ(), "GOOS="+p.goos, "GOARCH="+p.goarch, "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("go build for %s/%s: %v\n%s", p.goos, p.goarch, err, out)
			}
		})
	}
}
