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
)

// GoBinary compiles the Go main package pkg (an import path, or a path relative to the module
// root such as "./e2e/images/pause") into a static, stripped linux binary and returns its bytes:
// `CGO_ENABLED=0 go build -trimpath -ldflags="-s -w <ldflags>"`, run from the module root. Each of
// ldflags is one word of the linker's command line (e.g. "-X", "main.version=v1"); words with
// spaces are quoted for the go command.
func GoBinary(ctx context.Context, pkg string, ldflags ...string) ([]byte, error) {
	ld, err := joinLdflags(append([]string{"-s", "-w"}, ldflags...))
	if err != nil {
		return nil, err
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "images-gobinary-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	out := filepath.Join(dir, "bin")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags="+ld, "-o", out, pkg)
	cmd.Dir = root
	// The image config says runtime.GOARCH; build for the same.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("images: go build %s: %w\n%s", pkg, err, logs.Bytes())
	}
	return os.ReadFile(out)
}

// moduleRoot is the directory of the main module's go.mod, as the go command sees it from here.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("images: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("images: not inside a Go module (GOMOD=%q)", gomod)
	}
	return filepath.Dir(gomod), nil
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
