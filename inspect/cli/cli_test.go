package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
)

// runWith runs the command line with e's client (nil: the one the flags describe) and returns
// its exit code, stdout and stderr.
func runWith(client func() (kubernetes.Interface, string, error), args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	e := &env{flags: genericclioptions.NewConfigFlags(true), client: client,
		streams: genericiooptions.IOStreams{Out: &out, ErrOut: &errOut}}
	code := run(context.Background(), e, args)
	return code, out.String(), errOut.String()
}

// The command lines answered without a cluster: each command's own help, version, completion,
// and the mistakes (exit 2, with where to find help).
func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		code      int
		stdout    []string
		notStdout []string
		stderr    string
	}{
		{args: []string{"--help"}, stdout: []string{"kubectl driverset [command]", "status", "list", "logs", "why", "check", "completion", "--kubeconfig", "--as string", "--token string", "--request-timeout string"}},
		{args: []string{"help"}, stdout: []string{"Available Commands:"}},
		{args: []string{"status", "--help"}, stdout: []string{"kubectl driverset status <driver> [flags]", "kubectl driverset status pi-driver -n spark-jobs -o json", "-o, --output string", "--context string"},
			notStdout: []string{"--all-namespaces", "--since", "Available Commands"}},
		{args: []string{"help", "logs"}, stdout: []string{"kubectl driverset logs <driver> [flags]", "-c, --container string", "--since duration", "--timestamps", "-f, --follow", "-p, --previous", "--tail int"},
			notStdout: []string{"--output"}},
		{args: []string{"list", "-h"}, stdout: []string{"kubectl driverset list [flags]", "-A, --all-namespaces", "kubectl driverset list -A"}},
		{args: []string{"why", "--help"}, stdout: []string{"kubectl driverset why <driver> [flags]"}, notStdout: []string{"--output"}},
		{args: []string{"version"}, stdout: []string{"kubectl-driverset dev"}},
		{args: []string{"completion", "bash"}, stdout: []string{"bash completion V2 for kubectl-driverset"}},
		{args: []string{"completion", "zsh"}, stdout: []string{"#compdef kubectl-driverset"}},
		{args: []string{"completion", "fish"}, stdout: []string{"complete -c kubectl-driverset"}},
		{args: []string{"completion", "powershell"}, stdout: []string{"Register-ArgumentCompleter"}},
		{args: []string{"__complete", "status", "x", "-o", ""}, stdout: []string{"json\nyaml\n"}},
		{args: nil, code: 2, stderr: "no command\nSee 'kubectl driverset --help' for usage."},
		{args: []string{"restart", "x"}, code: 2, stderr: `unknown command "restart"`},
		{args: []string{"status"}, code: 2, stderr: "status takes 1 argument(s), got 0\nSee 'kubectl driverset status --help'"},
		{args: []string{"why", "a", "b"}, code: 2, stderr: "why takes 1 argument(s), got 2"},
		{args: []string{"list", "x"}, code: 2, stderr: "list takes 0 argument(s), got 1"},
		{args: []string{"status", "x", "-f"}, code: 2, stderr: "unknown shorthand flag: 'f'"},
		{args: []string{"status", "x", "--no-such-flag"}, code: 2, stderr: "no-such-flag"},
		{args: []string{"status", "x", "-o", "xml"}, code: 2, stderr: `-o "xml": want one of json, yaml`},
		{args: []string{"logs", "x", "--since", "-5m"}, code: 2, stderr: "--since must be positive"},
		{args: []string{"logs", "x", "--since", "soon"}, code: 2, stderr: `invalid argument "soon"`},
		{args: []string{"status", "x", "--kubeconfig", "/nonexistent/kubeconfig"}, code: 1, stderr: "/nonexistent/kubeconfig"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runWith(nil, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.stderr) {
				t.Errorf("exit %d, stderr %q; want exit %d, stderr with %q", code, errOut, tc.code, tc.stderr)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(out, s) {
					t.Errorf("stdout has no %q:\n%s", s, out)
				}
			}
			for _, s := range tc.notStdout {
				if strings.Contains(out, s) {
					t.Errorf("stdout has %q, a flag of another command:\n%s", s, out)
				}
			}
		})
	}
}

// kubectl's standard flags reach the client: impersonation, a token, the request timeout, the
// context and its namespace, or -n.
func TestKubectlFlagsReachTheClient(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- {name: c, cluster: {server: "https://127.0.0.1:6443"}}
users:
- {name: u, user: {token: from-file}}
contexts:
- {name: one, context: {cluster: c, user: u, namespace: team-a}}
- {name: two, context: {cluster: c, user: u, namespace: team-b}}
current-context: one
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args                 []string
		as, token, namespace string
		timeout              time.Duration
	}{
		{args: nil, token: "from-file", namespace: "team-a"},
		{args: []string{"--context", "two"}, token: "from-file", namespace: "team-b"},
		{args: []string{"-n", "jobs", "--as", "alice", "--token", "t0k", "--request-timeout", "7s"}, as: "alice", token: "t0k", namespace: "jobs", timeout: 7 * time.Second},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			e := &env{flags: genericclioptions.NewConfigFlags(true), streams: genericiooptions.NewTestIOStreamsDiscard()}
			root := newCommand(e)
			root.SetArgs(append([]string{"version", "--kubeconfig", kubeconfig}, tc.args...))
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			cfg, err := e.flags.ToRESTConfig()
			if err != nil {
				t.Fatal(err)
			}
			ns, _, err := e.flags.ToRawKubeConfigLoader().Namespace()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Impersonate.UserName != tc.as || cfg.BearerToken != tc.token || cfg.Timeout != tc.timeout || ns != tc.namespace {
				t.Errorf("as %q, token %q, timeout %v, namespace %q; want %q, %q, %v, %q",
					cfg.Impersonate.UserName, cfg.BearerToken, cfg.Timeout, ns, tc.as, tc.token, tc.timeout, tc.namespace)
			}
		})
	}
}
