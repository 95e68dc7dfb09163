package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/driverset/driverset/certs"
	"github.com/driverset/driverset/webhook"
)

// Issue 35: no server of serve's waits for a request body it does not read. Each server, built as
// serve builds it, gets requests that declare a body of 100 bytes and never send it: each is
// answered within 2 s (at once, but for the admission entry, which waits --admission-io-timeout
// for the body) and its connection closed. Before, net/http read what was left of such a body
// before it answered, with no deadline: the connection and its goroutine were held until the
// caller hung up. The answers are the servers' own (the metrics filter still refuses a caller
// without a token).
func TestNoServerWaitsForAnUnsentBody(t *testing.T) {
	const ioTimeout = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	webhookAddr := startWebhookServer(ctx, t, ioTimeout)
	secureMetrics := startMetricsServer(ctx, t, true)
	plainMetrics := startMetricsServer(ctx, t, false)
	checks := newProbes()
	checks.healthz["ping"] = healthz.Ping
	probeAddr := startPlainServer(ctx, t, "health probe", checks.handler())
	pprofAddr := startPlainServer(ctx, t, "pprof", pprofHandler())
	for _, tc := range []struct {
		name   string
		addr   string
		tls    bool
		path   string
		status int
		after  time.Duration // the least time before the answer
	}{
		{"webhook: an admission entry", webhookAddr, true, "/mutate-test", http.StatusRequestTimeout, ioTimeout},
		{"webhook: an unknown path", webhookAddr, true, "/nope", http.StatusNotFound, 0},
		{"metrics over HTTPS: /metrics", secureMetrics, true, "/metrics", http.StatusUnauthorized, 0},
		{"metrics over HTTPS: an unknown path", secureMetrics, true, "/nope", http.StatusUnauthorized, 0},
		{"metrics over HTTP: /metrics", plainMetrics, false, "/metrics", http.StatusOK, 0},
		{"metrics over HTTP: an unknown path", plainMetrics, false, "/nope", http.StatusNotFound, 0},
		{"probes: /healthz", probeAddr, false, "/healthz", http.StatusOK, 0},
		{"probes: /healthz/ping", probeAddr, false, "/healthz/ping", http.StatusOK, 0},
		{"probes: an unknown path", probeAddr, false, "/nope", http.StatusNotFound, 0},
		{"pprof: /debug/pprof/", pprofAddr, false, "/debug/pprof/", http.StatusOK, 0},
		{"pprof: an unknown path", pprofAddr, false, "/nope", http.StatusNotFound, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c net.Conn
			var err error
			if tc.tls {
				c, err = tls.Dial("tcp", tc.addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test's own server
			} else {
				c, err = net.Dial("tcp", tc.addr)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			_ = c.SetDeadline(start.Add(2 * time.Second))
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n", tc.path, tc.addr)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer within 2 s while the body is not sent: %v", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			took := time.Since(start)
			t.Logf("answered %d after %s", resp.StatusCode, took.Round(time.Millisecond))
			if resp.StatusCode != tc.status || took < tc.after {
				t.Errorf("answered %d after %s, want %d after at least %s", resp.StatusCode, took.Round(time.Millisecond), tc.status, tc.after)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Errorf("the connection stayed open after the answer (read: %v)", err)
			}
		})
	}
}

// startWebhookServer runs controller-runtime's webhook server with serve's options, serving an
// admission entry as serve does (an admission.Webhook that allows every review) at /mutate-test,
// and returns its address once it serves.
func startWebhookServer(ctx context.Context, t *testing.T, ioTimeout time.Duration) string {
	t.Helper()
	dir := t.TempDir()
	ca, err := certs.NewAuthority("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.IssueServing([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.WriteKeyPair(dir, cert, key); err != nil {
		t.Fatal(err)
	}
	f := serveFlags{webhookHost: "127.0.0.1", webhookPort: freePort(t), certDir: dir}
	srv := crwebhook.NewServer(webhookOptions(f, webhook.Callers{}))
	limit := webhook.NewLimiter(4, 1<<20)
	limit.Timeout = ioTimeout
	allow := admission.HandlerFunc(func(context.Context, admission.Request) admission.Response { return admission.Allowed("") })
	srv.Register("/mutate-test", admissionEntry(webhook.Callers{}, limit, &admission.Webhook{Handler: allow}))
	go func() { _ = srv.Start(ctx) }()
	started := srv.StartedChecker()
	waitServing(t, func() error { return started(nil) })
	return webhookAddr(f)
}

// startMetricsServer runs controller-runtime's metrics server with serve's options. Its filter
// needs an apiserver only for a caller with a token.
func startMetricsServer(ctx context.Context, t *testing.T, secure bool) string {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	f := serveFlags{metricsAddr: addr, metricsSecure: secure}
	o := metricsOptions(f)
	o.CertDir = t.TempDir() // none there: a self-signed certificate
	srv, err := metricsserver.NewServer(o, &rest.Config{Host: "https://127.0.0.1:1"}, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Start(ctx) }()
	waitServing(t, func() error { return dial(addr) })
	return addr
}

// startPlainServer runs one of serve's own servers with handler h.
func startPlainServer(ctx context.Context, t *testing.T, name string, h http.Handler) string {
	t.Helper()
	srv, err := plainServer(name, "127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Start(ctx) }()
	addr := srv.Listener.Addr().String()
	waitServing(t, func() error { return dial(addr) })
	return addr
}

func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err
}

func waitServing(t *testing.T, serving func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err = serving(); err == nil {
			return
		}
	}
	t.Fatalf("the server did not start: %v", err)
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// The start-up line tells an admin whether anyone on the pod network is answered, and where that
// is closed.
func TestWebhookCallersNote(t *testing.T) {
	for _, tc := range []struct {
		ca, names string
		want      []string
		not       string
	}{
		{want: []string{"anyone", "--webhook-client-ca", "#only-the-apiserver-calls-the-webhook"}, not: "only client"},
		{ca: "/etc/ca.crt", want: []string{"only client certificates", "/etc/ca.crt"}, not: "anyone"},
		{ca: "/etc/ca.crt", names: "kube-apiserver", want: []string{"/etc/ca.crt", "named kube-apiserver"}, not: "anyone"},
	} {
		got := webhookCallersNote(serveFlags{clientCA: tc.ca, clientNames: tc.names})
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("ca %q names %q: %q lacks %q", tc.ca, tc.names, got, w)
			}
		}
		if strings.Contains(got, tc.not) {
			t.Errorf("ca %q names %q: %q says %q", tc.ca, tc.names, got, tc.not)
		}
	}
}
