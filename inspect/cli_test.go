package inspect

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// `driverset check`'s command lines that are answered without a cluster. (The plugin's command
// line, `kubectl driverset`, is package inspect/cli.)
func TestCheckMainCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{args: []string{"--help"}, code: 0, stdout: "usage: driverset check [--namespace NS]"},
		{args: []string{"extra"}, code: 2, stderr: `check takes no argument, got ["extra"]`},
		{args: []string{"--no-such-flag"}, code: 2, stderr: "no-such-flag"},
		{args: []string{"--kubeconfig", "/nonexistent/kubeconfig"}, code: 1, stderr: "/nonexistent/kubeconfig"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := CheckMain(context.Background(), tc.args, &out, &errOut)
			if code != tc.code || !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errOut.String(), tc.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
					code, out.String(), errOut.String(), tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}
