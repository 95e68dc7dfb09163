package wrap

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Flags of self-fencing (`driverset wrap --heartbeat-lease NAME --self-fence T -- ...`), written
// into the driver's template by convert and read back by the controller with ParseArgs.
const (
	FlagHeartbeatLease = "heartbeat-lease"
	FlagSelfFence      = "self-fence"
)

// Renewer writes one renewal of the driver's heartbeat. nil means the apiserver has it. An error
// wrapping ErrHeartbeatTaken means a later incarnation holds the heartbeat: this one must stop at
// once. One wrapping ErrHeartbeatRefused (no permission) is not worth retrying.
type Renewer interface {
	Renew(ctx context.Context) error
}

var (
	// ErrHeartbeatTaken: the Lease names another pod as its holder.
	ErrHeartbeatTaken = errors.New("the heartbeat Lease is held by another incarnation of this driver")
	// ErrHeartbeatRefused: the apiserver refuses this pod's ServiceAccount the Lease.
	ErrHeartbeatRefused = errors.New("the heartbeat Lease is refused to this pod's ServiceAccount")
)

// beat is what wrap knows of its heartbeat: when the last renewal that succeeded was sent, on the
// monotonic clock and on the wall clock, and when one was last tried and whether it failed.
type beat struct {
	okAt, okWall time.Time
	triedAt      time.Time
	failed       bool
	taken        bool
}

// beatDecision says what to do now: stop the driver (Fence), or renew (RenewIn 0) with at most
// Left to get an answer, or wait RenewIn.
type beatDecision struct {
	Fence   bool
	RenewIn time.Duration
	Left    time.Duration
}

// Renewal cadence: four tries per T while renewals succeed, and a retry after a failure within
// T/10 (at least minRetry), so that one lost request never costs the driver.
const minRetry = 500 * time.Millisecond

// decideBeat is the heartbeat's rule as a pure function of what was renewed when, the time now
// (monotonic and wall) and T. The driver must stop once T has passed since the last renewal that
// succeeded was *sent*: the apiserver applied it at or after that, so the controller, which counts
// T plus a margin from when it saw the change, never fences a driver that may still run. Elapsed
// time is the larger of the monotonic and the wall clock's: the monotonic clock stands still while
// a VM is paused or a host suspended, and a driver that wakes up after its node was fenced must
// stop before it renews again.
func decideBeat(b beat, now, wall time.Time, t time.Duration) beatDecision {
	if b.taken {
		return beatDecision{Fence: true}
	}
	elapsed := now.Sub(b.okAt)
	if w := wall.Sub(b.okWall); w > elapsed {
		elapsed = w
	}
	left := t - elapsed
	if left <= 0 {
		return beatDecision{Fence: true}
	}
	every := t / 4
	if b.failed {
		every = max(t/10, minRetry)
	}
	in := b.triedAt.Add(every).Sub(now)
	if b.triedAt.IsZero() || in <= 0 {
		return beatDecision{Left: left}
	}
	return beatDecision{RenewIn: min(in, left), Left: left}
}

// heartbeat keeps the driver's heartbeat for T.
type heartbeat struct {
	renewer Renewer
	t       time.Duration
	now     func() time.Time // monotonic and wall; time.Now
	logf    func(string, ...any)
	b       beat
}

// acquire makes the first renewal before the driver starts: a driver runs only under a heartbeat
// the controller can see. It tries for T, then gives up.
func (h *heartbeat) acquire(ctx context.Context) error {
	start := h.now()
	h.b = beat{okAt: start, okWall: start.Round(0)}
	var last error
	for {
		d := decideBeat(h.b, h.now(), h.now().Round(0), h.t)
		if d.Fence {
			return fmt.Errorf("no heartbeat within %s: %w", h.t, last)
		}
		if d.RenewIn > 0 {
			if err := sleep(ctx, d.RenewIn); err != nil {
				return err
			}
			continue
		}
		if last = h.renew(ctx, d.Left); last == nil {
			return nil
		}
		if errors.Is(last, ErrHeartbeatRefused) || errors.Is(last, ErrHeartbeatTaken) {
			return last
		}
	}
}

// keep renews the heartbeat until ctx ends; it returns the reason to stop the driver, or "" when
// ctx ended first.
func (h *heartbeat) keep(ctx context.Context) string {
	for {
		d := decideBeat(h.b, h.now(), h.now().Round(0), h.t)
		if d.Fence {
			if h.b.taken {
				return "a later incarnation of this driver holds its heartbeat Lease"
			}
			return fmt.Sprintf("the heartbeat Lease could not be renewed for %s (self-fence)", h.t)
		}
		if d.RenewIn > 0 {
			if sleep(ctx, d.RenewIn) != nil {
				return ""
			}
			continue
		}
		if err := h.renew(ctx, d.Left); err != nil {
			if ctx.Err() != nil {
				return ""
			}
			h.logf("heartbeat: %v", err)
		}
	}
}

// renew tries one renewal, given at most left for it, and records the result.
func (h *heartbeat) renew(ctx context.Context, left time.Duration) error {
	sent := h.now()
	rctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	// The answer is awaited at most until the deadline, even from a Renewer that ignores rctx.
	done := make(chan error, 1)
	go func() { done <- h.renewer.Renew(rctx) }()
	var err error
	select {
	case err = <-done:
	case <-rctx.Done():
		err = rctx.Err()
	}
	h.b.triedAt, h.b.failed = sent, err != nil
	switch {
	case err == nil:
		h.b.okAt, h.b.okWall = sent, sent.Round(0)
	case errors.Is(err, ErrHeartbeatTaken):
		h.b.taken = true
	}
	return err
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
