package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/driverset/driverset/version"
)

func TestServeFlags(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{name: "image given", args: []string{"--image=registry.example/driverset:v1"}},
		{name: "image read from the pod", env: map[string]string{"POD_NAME": "driverset-0", "POD_NAMESPACE": "driverset-system"}},
		{name: "no image outside a pod", wantErr: "--image is required outside a pod"},
		{name: "unknown flag", args: []string{"--image=x", "--no-such-flag"}, wantErr: "no-such-flag"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("POD_NAME", tc.env["POD_NAME"])
			t.Setenv("POD_NAMESPACE", tc.env["POD_NAMESPACE"])
			f, err := parseServeFlags(tc.args)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
			case tc.wantErr == "" && (f.webhookPort != 9443 || !f.leaderElect || f.fenceAfter != 0):
				t.Errorf("defaults: port %d, leader election %v, fence-after %v", f.webhookPort, f.leaderElect, f.fenceAfter)
			}
		})
	}
}

// copy-binary installs this very executable, runnable by the driver image's own user.
func TestCopyBinary(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "bin", "driverset")
	if err := copyBinary(dest); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(self)
	got, err := os.ReadFile(dest)
	if err != nil || string(got) != string(want) {
		t.Fatalf("copied %d bytes (%v), want the %d bytes of the running binary", len(got), err, len(want))
	}
	info, err := os.Stat(dest)
	if err != nil || info.Mode().Perm() != 0o755 {
		t.Errorf("mode %v (%v), want 0755", info.Mode().Perm(), err)
	}
}

func TestUnknownCommand(t *testing.T) {
	if code := run([]string{"frobnicate"}); code != 2 {
		t.Errorf("exit code %d for an unknown command, want 2", code)
	}
	if code := run(nil); code != 2 {
		t.Errorf("exit code %d with no command, want 2", code)
	}
}

// `driverset version` is a command of its own (exit 0), not an unknown one.
func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if code := run(args); code != 0 {
			t.Errorf("exit code %d for %v, want 0", code, args)
		}
	}
}

// serve's metrics include driverset_build_info, next to the controller's, the admission
// decisions, the drivers by state and the certificate expiry.
func TestRegisterMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := registerMetrics(reg, nil, fake.NewClientBuilder().Build(), "127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.controller == nil || m.admissions == nil {
		t.Fatalf("metrics %+v: want the controller's and the admission decisions", m)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	if !names["driverset_drivers"] || !names["driverset_drivers_waiting_for_admin_oldest_seconds"] {
		t.Errorf("the drivers-by-state gauges are not registered: %v", names)
	}
	for _, f := range families {
		if f.GetName() != "driverset_build_info" {
			continue
		}
		labels := map[string]string{}
		for _, l := range f.Metric[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["version"] != version.Get().Version || labels["go_version"] != runtime.Version() || f.Metric[0].GetGauge().GetValue() != 1 {
			t.Errorf("driverset_build_info %v = %v, want version %q, go_version %q, value 1",
				labels, f.Metric[0].GetGauge().GetValue(), version.Get().Version, runtime.Version())
		}
		return
	}
	t.Error("driverset_build_info is not registered")
}

// --log-level chooses how much serve logs; zap's own flags are there for finer control, and
// --zap-log-level, being the more specific, wins.
func TestServeLogLevel(t *testing.T) {
	all := []string{"debug", "info", "error"}
	cases := []struct {
		name    string
		args    []string
		logged  []string // which of a debug, an info and an error line come out
		wantErr string
	}{
		{name: "default is info", logged: []string{"info", "error"}},
		{name: "debug", args: []string{"--log-level=debug"}, logged: all},
		{name: "info", args: []string{"--log-level=info"}, logged: []string{"info", "error"}},
		{name: "error", args: []string{"--log-level=error"}, logged: []string{"error"}},
		{name: "zap's own level wins", args: []string{"--log-level=error", "--zap-log-level=debug"}, logged: all},
		{name: "zap's development mode logs debug by default", args: []string{"--zap-devel"}, logged: all},
		{name: "an explicit level wins over development mode", args: []string{"--zap-devel", "--log-level=error"}, logged: []string{"error"}},
		{name: "zap's encoder flag is there", args: []string{"--zap-encoder=console"}, logged: []string{"info", "error"}},
		{name: "unknown level", args: []string{"--log-level=verbose"}, wantErr: `--log-level "verbose"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseServeFlags(append([]string{"--image=x"}, tc.args...))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one mentioning %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The logger serve builds from these flags: what it writes is what counts.
			var out bytes.Buffer
			logger := newLogger(f, &out)
			logger.V(1).Info("line-debug")
			logger.Info("line-info")
			logger.Error(nil, "line-error")
			var logged []string
			for _, l := range all {
				if strings.Contains(out.String(), "line-"+l) {
					logged = append(logged, l)
				}
			}
			if strings.Join(logged, ",") != strings.Join(tc.logged, ",") {
				t.Errorf("logged %v, want %v; output:\n%s", logged, tc.logged, out.String())
			}
		})
	}
}

// fakeCache syncs when synced is true, else waits for the context like an unsynced cache.
type fakeCache struct{ synced bool }

func (f fakeCache) WaitForCacheSync(ctx context.Context) bool {
	if f.synced {
		return true
	}
	<-ctx.Done()
	return false
}

// TestCachesSynced: readiness fails while the informer caches the webhooks read are not synced.
func TestCachesSynced(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
	if err := cachesSynced(fakeCache{})(req); err == nil {
		t.Error("ready with caches not synced")
	}
	if err := cachesSynced(fakeCache{synced: true})(req); err != nil {
		t.Errorf("not ready with synced caches: %v", err)
	}
}

// `driverset check` (helm test's pod) is the plugin's check: a cluster it cannot reach fails it
// (exit 1), a stray argument is a usage error (exit 2).
func TestCheckCommand(t *testing.T) {
	if code := run([]string{"check", "--kubeconfig", filepath.Join(t.TempDir(), "none")}); code != 1 {
		t.Errorf("exit code %d without a cluster, want 1", code)
	}
	if code := run([]string{"check", "extra"}); code != 2 {
		t.Errorf("exit code %d with an argument, want 2", code)
	}
}

// Metrics are served over HTTPS with authentication and authorization unless turned off (the
// filter is always set: it also keeps bodies unread; TestNoServerWaitsForAnUnsentBody sees that
// it refuses a caller without a token over HTTPS only).
func TestMetricsOptions(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		secure bool
	}{
		{nil, true},
		{[]string{"--metrics-secure=true"}, true},
		{[]string{"--metrics-secure=false"}, false},
	} {
		f, err := parseServeFlags(append([]string{"--image=driverset:test"}, tc.args...))
		if err != nil {
			t.Fatal(err)
		}
		o := metricsOptions(f)
		if o.SecureServing != tc.secure || o.FilterProvider == nil || o.BindAddress != ":8080" {
			t.Errorf("%v: SecureServing %v, filter %v, address %q; want secure=%v with a filter on :8080",
				tc.args, o.SecureServing, o.FilterProvider != nil, o.BindAddress, tc.secure)
		}
	}
}

// Go's profiles are served without authentication, so they are off unless an admin asks.
func TestPprofOffByDefault(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "0"},
		{[]string{"--pprof-bind-address=127.0.0.1:6060"}, "127.0.0.1:6060"},
	} {
		f, err := parseServeFlags(append([]string{"--image=driverset:test"}, tc.args...))
		if err != nil {
			t.Fatal(err)
		}
		if f.pprofAddr != tc.want {
			t.Errorf("%v: pprof at %q, want %q", tc.args, f.pprofAddr, tc.want)
		}
	}
}
