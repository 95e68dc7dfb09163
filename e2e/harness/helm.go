package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// HelmBinary is the helm CLI the tests run the docs' helm commands with: helm in
// $DRIVERSET_HELM_BIN, else in the folder hack/helm-build.sh prints (it builds the helm e2e/go.mod
// pins once, then reuses it).
func HelmBinary(ctx context.Context) (string, error) {
	dir := os.Getenv("DRIVERSET_HELM_BIN")
	if dir == "" {
		root, err := ModuleRoot()
		if err != nil {
			return "", err
		}
		cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "helm-build.sh"))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("hack/helm-build.sh: %w", err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		dir = lines[len(lines)-1]
	}
	helm := filepath.Join(dir, "helm")
	if _, err := os.Stat(helm); err != nil {
		return "", fmt.Errorf("no helm CLI: %w", err)
	}
	return helm, nil
}
