package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// PrometheusBin is the folder with promtool and prometheus: $DRIVERSET_PROMETHEUS_BIN, else what
// hack/prometheus-build.sh prints (it builds them from the Go module proxy once, then reuses them).
func PrometheusBin(ctx context.Context) (string, error) {
	if dir := os.Getenv("DRIVERSET_PROMETHEUS_BIN"); dir != "" {
		return dir, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "prometheus-build.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/prometheus-build.sh: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}
