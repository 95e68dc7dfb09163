package wrap

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestDecideBeat(t *testing.T) {
	const T = 40 * time.Second
	t0 := time.Now()
	at := t0.Add
	ok := func(d time.Duration) beat { return beat{okAt: at(d), okWall: at(d).Round(0), triedAt: at(d)} }
	cases := []struct {
		name      string
		b         beat
		now, wall time.Duration // since t0, on the monotonic and the wall clock
		want      beatDecision
	}{
		{"first try at once", beat{okAt: t0, okWall: t0.Round(0)}, 0, 0, beatDecision{Left: T}},
		{"renewed just now: wait a quarter of T", ok(0), 0, 0, beatDecision{RenewIn: T / 4, Left: T}},
		{"a quarter of T after the last renewal: renew", ok(0), T / 4, T / 4, beatDecision{Left: 3 * T / 4}},
		{"a failed try is retried after T/10", beat{okAt: t0, okWall: t0.Round(0), triedAt: at(T / 4), failed: true}, T / 4, T / 4,
			beatDecision{RenewIn: T / 10, Left: 3 * T / 4}},
		{"the wait never passes the deadline", beat{okAt: t0, okWall: t0.Round(0), triedAt: at(T - time.Second), failed: true}, T - time.Second, T - time.Second,
			beatDecision{RenewIn: time.Second, Left: time.Second}},
		{"T since the last renewal was sent: stop the driver", beat{okAt: t0, okWall: t0.Round(0), triedAt: at(T - time.Second), failed: true}, T, T,
			beatDecision{Fence: true}},
		{"a wall clock that jumped T (the monotonic clock stood still while suspended): stop", ok(0), time.Second, T,
			beatDecision{Fence: true}},
		{"a wall clock set back does not hold the deadline off", ok(0), T, -time.Hour, beatDecision{Fence: true}},
		{"a later incarnation holds the Lease: stop at once", beat{okAt: t0, okWall: t0.Round(0), taken: true}, 0, 0, beatDecision{Fence: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideBeat(tc.b, at(tc.now), at(tc.wall).Round(0), T); got != tc.want {
				t.Errorf("decideBeat = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// fakeRenewer answers renewals with ok until it is told to fail, then with failure (or hangs).
type fakeRenewer struct {
	mu     sync.Mutex
	fail   error
	hang   bool
	count  int
	lastOK time.Time
}

func (f *fakeRenewer) Renew(ctx context.Context) error {
	f.mu.Lock()
	fail, hang := f.fail, f.hang
	f.count++
	if fail == nil && !hang {
		f.lastOK = time.Now()
	}
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return fail
}

func (f *fakeRenewer) set(fail error, hang bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail, f.hang = fail, hang
}

func (f *fakeRenewer) renewals() (int, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count, f.lastOK
}

func (p pod) startFenced(ctx context.Context, command []string, r Renewer, selfFence time.Duration, out *bytes.Buffer) <-chan result {
	done := make(chan result, 1)
	o := Options{StateDir: p.state, TerminationLog: p.termLog, Command: command, Stdout: out, Stderr: out,
		Signals: make(chan os.Signal), HeartbeatLease: "d-0-heartbeat", SelfFence: selfFence, Renewer: r}
	go func() {
		code, err := Run(ctx, o)
		done <- result{code, err}
	}()
	return done
}

// The driver and what it started run while the heartbeat is renewed; once renewals fail (here:
// they hang, as on a partitioned node), wrap kills the whole tree within T of the last renewal
// that succeeded, and records it as self-fenced, not as the driver's failure.
func TestRunKillsTheDriverTreeWhenTheHeartbeatCannotBeRenewedForT(t *testing.T) {
	const T = 2 * time.Second
	for _, failure := range []string{"hang", "error"} {
		t.Run(failure, func(t *testing.T) {
			p := newPod(t)
			r := &fakeRenewer{}
			var out bytes.Buffer
			done := p.startFenced(context.Background(), child(t, "tree", p.side), r, T, &out)
			driver, err := strconv.Atoi(waitFile(t, filepath.Join(p.side, "ready")))
			if err != nil {
				t.Fatal(err)
			}
			grandchild := p.lingering(t)
			time.Sleep(T) // several renewals while the driver runs
			if n, _ := r.renewals(); n < 4 {
				t.Errorf("%d renewals in T, want the first and one every T/4", n)
			}
			if !alive(driver) || !alive(grandchild) {
				t.Fatal("the driver was stopped while its heartbeat was renewed")
			}
			r.set(errors.New("connection refused"), failure == "hang")
			res := await(t, done, 3*T)
			_, lastOK := r.renewals()
			stopped := time.Since(lastOK)
			if stopped > T+time.Second {
				t.Errorf("wrap ended %v after the last renewal that succeeded, want within T=%v (and its reaping)", stopped, T)
			}
			if alive(driver) || alive(grandchild) {
				t.Errorf("driver alive %v, its grandchild (ignores SIGTERM) alive %v after wrap ended", alive(driver), alive(grandchild))
			}
			if res.code != 128+int(syscall.SIGKILL) || res.err != nil {
				t.Errorf("Run = %d, %v; want 137 (killed), no error", res.code, res.err)
			}
			code, msg := p.recorded(t)
			if code != 137 || !IsSelfFenced(msg) || !strings.Contains(msg, "could not be renewed for 2s") {
				t.Errorf("recorded %q, want 137 and self-fenced with the reason", msg)
			}
			t.Logf("stopped %v after the last renewal (T %v); record: %q", stopped.Round(time.Millisecond), T, msg)
		})
	}
}

// No heartbeat, no driver: a ServiceAccount without the ClusterRole gets a clear reason, and
// nothing is recorded, so the next start of the container tries again.
func TestRunDoesNotStartTheDriverWithoutAHeartbeat(t *testing.T) {
	p := newPod(t)
	r := &fakeRenewer{fail: ErrHeartbeatRefused}
	var out bytes.Buffer
	res := await(t, p.startFenced(context.Background(), child(t, "exit", "0", p.side), r, time.Minute, &out), 10*time.Second)
	if res.code != ExitWrapFailed || res.err == nil || !strings.Contains(res.err.Error(), "heartbeat Lease d-0-heartbeat could not be held") {
		t.Errorf("Run = %d, %v; want %d and the reason", res.code, res.err, ExitWrapFailed)
	}
	if n := p.runs(t); n != 0 {
		t.Errorf("the driver ran %d times without a heartbeat", n)
	}
	if _, err := os.Stat(filepath.Join(p.state, exitFile)); !os.IsNotExist(err) {
		t.Errorf("an exit record was written (%v): the next start would not try again", err)
	}
	if msg, _ := os.ReadFile(p.termLog); !DriverNotStarted(string(msg)) {
		t.Errorf("termination message %q does not say the driver did not start", msg)
	}
}

// A driver whose heartbeat is renewed ends as it would without one: its own code, not self-fenced.
func TestRunWithAHeartbeatRecordsTheDriversOwnExit(t *testing.T) {
	p := newPod(t)
	r := &fakeRenewer{}
	var out bytes.Buffer
	res := await(t, p.startFenced(context.Background(), child(t, "exit", "3", p.side), r, time.Minute, &out), 10*time.Second)
	if res.code != 3 || res.err != nil {
		t.Fatalf("Run = %d, %v; want 3", res.code, res.err)
	}
	if code, msg := p.recorded(t); code != 3 || IsSelfFenced(msg) {
		t.Errorf("recorded %q, want 3 and not self-fenced", msg)
	}
	if n, _ := r.renewals(); n < 1 {
		t.Error("the heartbeat was not held before the driver started")
	}
}

// A later incarnation took the Lease: this driver stops at once, whatever is left of T.
func TestRunStopsAtOnceWhenALaterIncarnationHoldsTheHeartbeat(t *testing.T) {
	p := newPod(t)
	r := &fakeRenewer{}
	var out bytes.Buffer
	done := p.startFenced(context.Background(), child(t, "sleep", p.side), r, 4*time.Second, &out)
	waitFile(t, filepath.Join(p.side, "ready"))
	r.set(ErrHeartbeatTaken, false)
	begin := time.Now()
	res := await(t, done, 10*time.Second)
	if took := time.Since(begin); took > 2*time.Second+time.Second/2 {
		t.Errorf("wrap took %v to stop after the Lease was taken, want about one renewal period (1s)", took)
	}
	if _, msg := p.recorded(t); res.code != 137 || !IsSelfFenced(msg) || !strings.Contains(msg, "later incarnation") {
		t.Errorf("Run = %d, recorded %q", res.code, msg)
	}
}

func TestIsSelfFenced(t *testing.T) {
	for msg, want := range map[string]bool{
		TerminationMessage(137, selfFencedDetail("no heartbeat", "killed")):    true,
		TerminationMessage(137, "the driver command x was killed by signal 9"): false,
		"self-fenced: not wrap's":                 false,
		TerminationMessage(1, ""):                 false,
		"driverset-exit-code=x\nself-fenced: bad": false,
	} {
		if got := IsSelfFenced(msg); got != want {
			t.Errorf("IsSelfFenced(%q) = %v, want %v", msg, got, want)
		}
	}
}
