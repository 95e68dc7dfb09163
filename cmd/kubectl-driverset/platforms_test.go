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
	// One of each other operating system hack/release builds the plugin for (every build and vet of
	// the module compiles this machine's own): what breaks a platform is code for one OS, and each
	// cold cross-build of the plugin's dependencies costs a minute or two of CI on 2 cores.
	// `make release-check` builds all six.
	for _, p := range []struct{ goos, goarch string }{
		{"darwin", "arm64"}, {"windows", "amd64"},
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
