package main

import (
	"os/exec"
	"strings"
	"testing"
)

// driverset's own binary (the image every driver pod's init container pulls) links none of the
// plugin's command line: `driverset check` is inspect.CheckMain, not the cobra tree of
// inspect/cli with k8s.io/cli-runtime and kustomize behind it.
func TestBinaryLinksNoPluginCommandLine(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/driverset/driverset/inspect/cli", "k8s.io/cli-runtime/", "sigs.k8s.io/kustomize/"} {
			if strings.HasPrefix(pkg, banned) {
				t.Errorf("driverset's binary links %s", pkg)
			}
		}
	}
}
