package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/driverset/driverset/seal"
)

// A replica whose key file is not there yet is alive and not ready, and goes on once the kubelet
// brings the file.
func TestServeWaitsForTheSealKey(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	path := filepath.Join(t.TempDir(), "hmac-key")
	keys := seal.NewKeyFile(path)
	done := make(chan error, 1)
	go func() { done <- waitForSealKey(context.Background(), serveFlags{probeAddr: addr}, keys) }()

	status := func(p string) int {
		resp, err := http.Get("http://" + addr + p)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(10 * time.Second)
	for status("/healthz") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("no /healthz while waiting for the key")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := status("/readyz"); got != http.StatusInternalServerError {
		t.Fatalf("/readyz = %d with no key file, want 500", got)
	}
	select {
	case err := <-done:
		t.Fatalf("returned with no key file: %v", err)
	default:
	}
	if err := os.WriteFile(path, []byte(strings.Repeat("k", seal.MinKeyLen)), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * sealKeyPoll):
		t.Fatal("still waiting after the key file appeared")
	}
	if keys.Key() == nil {
		t.Fatal("returned without a key")
	}
	// The waiting server is gone: serve's own probe server takes the address next.
	if ln, err := net.Listen("tcp", addr); err != nil {
		t.Fatalf("the probe address is still held: %v", err)
	} else {
		ln.Close()
	}
}

// A replica that starts with the key there does not wait, and ctx ending ends the wait.
func TestServeSealKeyWaitEnds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hmac-key")
	if err := os.WriteFile(path, []byte(strings.Repeat("k", seal.MinKeyLen)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := waitForSealKey(context.Background(), serveFlags{probeAddr: "0"}, seal.NewKeyFile(path)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := waitForSealKey(ctx, serveFlags{probeAddr: "0"}, seal.NewKeyFile(path+"-missing")); err == nil {
		t.Fatal("a wait with no key ended without an error")
	}
}

// The flags are checked before any client is built.
func TestMakeSealKeyFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"-h"}, 0},
		{[]string{"--no-such-flag"}, 2},
		{[]string{"--namespace="}, 2},
		{[]string{"--namespace=ns", "--kubeconfig=/nonexistent/kubeconfig"}, 1},
	} {
		var out, errb bytes.Buffer
		if got := makeSealKey(context.Background(), tc.args, &out, &errb); got != tc.want {
			t.Errorf("make-seal-key %v: exit %d, want %d (stderr %q)", tc.args, got, tc.want, errb.String())
		}
	}
}
