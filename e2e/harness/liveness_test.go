package harness

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/driverset/driverset/e2e/sparksim"
)

// poll asks the liveness check before each poll of cond; a nil check is no check.
func TestLivenessPoll(t *testing.T) {
	down := errors.New("etcd exited (signal: killed)")
	cases := []struct {
		name      string
		alive     Liveness
		wantErr   error
		wantPolls int
	}{
		{"no check", nil, nil, 3},
		{"all alive", func() error { return nil }, nil, 3},
		{"a component down", func() error { return down }, down, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			polls := 0
			err := tc.alive.poll(context.Background(), time.Millisecond, 10*time.Second, func(context.Context) (bool, error) {
				polls++
				return polls == 3, nil
			})
			if !errors.Is(err, tc.wantErr) || polls != tc.wantPolls {
				t.Errorf("poll = %v after %d polls of cond, want %v after %d", err, polls, tc.wantErr, tc.wantPolls)
			}
		})
	}
}

// Each wait of the harness on the cluster, given a liveness check that reports a component down
// for good, ends at once with that report: not at its timeout, with a message about what it
// waited for (an apiserver that refuses every connection, here).
func TestHarnessWaitsEndAtOnceWhenTheClusterIsDown(t *testing.T) {
	down := errors.New("etcd exited (signal: killed); end of etcd.log: ...")
	alive := Liveness(func() error { return down })
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	deadAPI := &rest.Config{Host: "http://127.0.0.1:" + strconv.Itoa(port)} // nothing listens
	deadClient, err := kubernetes.NewForConfig(deadAPI)
	if err != nil {
		t.Fatal(err)
	}
	plan := &sparksim.Plan{DriverPodName: "app-driver", DriverPod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}}}
	cases := []struct {
		name string
		wait func(ctx context.Context, t *testing.T) error
	}{
		{"WaitWebhookActive", func(ctx context.Context, _ *testing.T) error {
			return WaitWebhookActive(ctx, deadAPI, alive)
		}},
		{"Start: driverset never ready", func(ctx context.Context, t *testing.T) error {
			d, err := Start(ctx, Options{Binary: neverReady(t), Dir: t.TempDir(), Alive: alive})
			if err == nil {
				d.Kill()
			}
			return err
		}},
		{"StartMonitor: the watch never syncs", func(ctx context.Context, _ *testing.T) error {
			m, err := StartMonitor(ctx, deadClient, alive)
			if err == nil {
				m.Stop()
			}
			return err
		}},
		{"Monitor.Check: the apiserver dies after the sync", func(ctx context.Context, t *testing.T) error {
			c := fake.NewClientset()
			var dead bool // set before Check, which alone asks
			m, err := StartMonitor(context.Background(), c, func() error {
				if dead {
					return down
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Stop()
			c.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New("connection refused")
			})
			dead = true
			return m.Check(ctx, "")
		}},
		{"Submit: the driver pod never posted", func(ctx context.Context, _ *testing.T) error {
			s := &Submission{Plan: plan, alive: alive, done: make(chan struct{})} // spark-submit runs
			return s.driverPodPosted(ctx, deadClient)
		}},
		{"Submission.Wait: spark-submit never returns", func(ctx context.Context, _ *testing.T) error {
			s := &Submission{Plan: plan, alive: alive, done: make(chan struct{})}
			return s.returned(ctx, time.Minute)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Far shorter than any of the waits' own timeouts: a wait that ignores the check
			// fails here on this deadline, not after a minute.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			start := time.Now()
			err := tc.wait(ctx, t)
			took := time.Since(start).Round(time.Millisecond)
			if !errors.Is(err, down) {
				t.Fatalf("after %s: %v; want the liveness check's error %q", took, err, down)
			}
			if ctx.Err() != nil {
				t.Errorf("ended after %s, at its deadline, not at once", took)
			}
		})
	}
}

// neverReady is a stand-in for the driverset binary that runs, but never serves /readyz.
func neverReady(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "driverset")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil { //nolint:gosec // an executable, for Start to run
		t.Fatal(err)
	}
	return bin
}
