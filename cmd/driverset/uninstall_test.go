package main

import (
	"bytes"
	"context"
	"testing"
)

// The flags are checked before any client is built: a malformed namespace is a usage error.
func TestUninstallCleanupFlags(t *testing.T) {
	cases := []struct {
		args []string
		want int
	}{
		{[]string{"-h"}, 0},
		{[]string{"--no-such-flag"}, 2},
		{[]string{"--namespaces", "Bad_NS"}, 2},
		{[]string{"--namespaces", "a,,b"}, 2},
		{[]string{"--kubeconfig", "/nonexistent/kubeconfig", "--dry-run"}, 1},
	}
	for _, tc := range cases {
		var out, errb bytes.Buffer
		if got := uninstallCleanup(context.Background(), tc.args, &out, &errb); got != tc.want {
			t.Errorf("uninstall-cleanup %v: exit %d, want %d (stderr %q)", tc.args, got, tc.want, errb.String())
		}
	}
}
