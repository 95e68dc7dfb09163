package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The product's go.mod is what a dependency scanner reports against driverset and what anyone
// importing contract/ inherits: it holds what the product's packages and their unit tests link,
// and nothing the test harness alone needs. The harness (e2e/) and the release tool
// (hack/release) are modules of their own (CONTRIBUTING.md, "Modules").
func TestModuleHoldsNoTestHarness(t *testing.T) {
	// The module on its own, as a clone builds it: a go.work of the developer's would add the
	// harness's modules to what the go command sees.
	goList := func(args ...string) *exec.Cmd {
		cmd := exec.Command("go", append([]string{"list"}, args...)...)
		cmd.Env = append(os.Environ(), "GOWORK=off")
		return cmd
	}
	out, err := goList("-m", "-f", "{{if not .Main}}{{.Path}}{{end}}", "all").Output()
	if err != nil {
		t.Fatalf("go list -m all: %v", err)
	}
	required := map[string]bool{}
	for _, m := range strings.Fields(string(out)) {
		required[m] = true
	}
	for _, tc := range []struct{ module, usedBy string }{
		{"helm.sh/helm/v3", "e2e/install's chart tests and hack/release's chart packaging"},
		{"github.com/godbus/dbus/v5", "e2e/testbed's logind for real nodes"},
		{"github.com/Masterminds/sprig/v3", "helm's templates"},
	} {
		if required[tc.module] {
			t.Errorf("go.mod requires %s, which only %s use", tc.module, tc.usedBy)
		}
	}

	pkgs, err := goList("-f", "{{.Dir}}", "github.com/driverset/driverset/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dir := range strings.Fields(string(pkgs)) {
		for _, harness := range []string{"/e2e", "/hack/release"} {
			if strings.Contains(dir+"/", harness+"/") {
				t.Errorf("the product's module holds %s", dir)
			}
		}
	}
}
