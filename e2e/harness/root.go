package harness

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
)

// ModuleRoot is the folder of driverset's go.mod, wherever the test runs from.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == "/dev/null" {
		return "", errors.New("not inside driverset's module")
	}
	return filepath.Dir(gomod), nil
}
