package inspect

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The command lines that are answered without a cluster: help, version, and the mistakes.
func TestMainCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{args: []string{"--help"}, code: 0, stdout: "kubectl driverset status <driver>"},
		{args: []string{"help"}, code: 0, stdout: "kubectl driverset logs <driver> [-f]"},
		{args: []string{"version"}, code: 0, stdout: "kubectl-driverset dev"},
		{args: nil, code: 2, stderr: "no command"},
		{args: []string{"restart", "x"}, code: 2, stderr: `unknown command "restart"`},
		{args: []string{"status"}, code: 2, stderr: "status takes 1 argument(s), got 0"},
		{args: []string{"why", "a", "b"}, code: 2, stderr: "why takes 1 argument(s), got 2"},
		{args: []string{"status", "x", "-f"}, code: 2, stderr: "flags of logs"},
		{args: []string{"status", "x", "--no-such-flag"}, code: 2, stderr: "no-such-flag"},
		{args: []string{"status", "x", "--kubeconfig", "/nonexistent/kubeconfig"}, code: 1, stderr: "/nonexistent/kubeconfig"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Main(context.Background(), "kubectl driverset", tc.args, &out, &errOut)
			if code != tc.code || !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errOut.String(), tc.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
					code, out.String(), errOut.String(), tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}
