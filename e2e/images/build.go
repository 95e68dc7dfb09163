package images

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/driverset/driverset/e2e/harness"
)

// GoBinary compiles the Go main package pkg (a path relative to the repository's root, such as
// "./cmd/driverset" or "./e2e/images/pause") into a static, stripped linux binary and returns its
// bytes: `CGO_ENABLED=0 go build -trimpath -ldflags="-s -w <ldflags>" .`, run in pkg's folder, so
// that the module holding it picks the versions it links: the product's go.mod for driverset, as
// it ships, and e2e/go.mod for the harness's programs. Each of ldflags is one word of the linker's
// command line (e.g. "-X", "main.version=v1"); words with spaces are quoted for the go command.
func GoBinary(ctx context.Context, pkg string, ldflags ...string) ([]byte, error) {
	ld, err := joinLdflags(append([]string{"-s", "-w"}, ldflags...))
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(pkg, "./") {
		return nil, fmt.Errorf("images: package %q is not a path from the repository's root (./…)", pkg)
	}
	root, err := harness.ModuleRoot()
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	dir, err := os.MkdirTemp("", "images-gobinary-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	out := filepath.Join(dir, "bin")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags="+ld, "-o", out, ".")
	cmd.Dir = filepath.Join(root, filepath.FromSlash(pkg))
	// The image config says runtime.GOARCH; build for the same.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("images: go build %s: %w\n%s", pkg, err, logs.Bytes())
	}
	return os.ReadFile(out)
}

// joinLdflags makes one -ldflags value of words, quoting those with blanks as the go command's
// flag splitting (cmd/internal/quoted) expects: in single quotes, or in double quotes when the
// word holds a single quote. It has no escapes, so a word with both quotes and a blank is refused.
func joinLdflags(words []string) (string, error) {
	var out []string
	for _, w := range words {
		switch {
		case w != "" && !strings.ContainsAny(w, " \t\n\r'\""):
			out = append(out, w)
		case !strings.Contains(w, "'"):
			out = append(out, "'"+w+"'")
		case !strings.Contains(w, `"`):
			out = append(out, `"`+w+`"`)
		default:
			return "", fmt.Errorf("images: linker flag %q holds both quote characters", w)
		}
	}
	return strings.Join(out, " "), nil
}
