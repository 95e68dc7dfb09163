package harness

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// ModuleRoot is the folder of driverset's own go.mod, the repository's root (charts/, manifests/,
// hack/ and the product's packages), wherever the test runs from. The harness is a module of its
// own (e2e/go.mod), so this is not the go.mod the go command finds from here but the folder it
// resolves the product's module to: e2e/go.mod's replace, or a developer's go.work.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", productModule).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "", fmt.Errorf("go list -m %s: %w: %s", productModule, err, exit.Stderr)
		}
		return "", fmt.Errorf("go list -m %s: %w", productModule, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("go list -m %s: no folder (not run from driverset's repository?)", productModule)
	}
	return dir, nil
}

// productModule is driverset's module path.
const productModule = "github.com/driverset/driverset"
