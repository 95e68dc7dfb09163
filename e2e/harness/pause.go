package harness

import (
	"errors"
	"syscall"
	"time"
)

// Pause stops the driverset process (SIGSTOP) for d and lets it go on (SIGCONT): a driverset
// that reacts d later, which a benchmark uses to show that it sees a regression of that size.
// Test-only: the product has no such setting.
func (d *Driverset) Pause(dur time.Duration) error {
	p := d.process()
	if p == nil {
		return errors.New("driverset is not running")
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	time.Sleep(dur)
	return p.Signal(syscall.SIGCONT)
}

// Exited reports whether the driverset process has ended for good (e.g. it lost its leader lease
// while the apiserver was away, controller-runtime then exits, and Options.Restart was not set).
func (d *Driverset) Exited() bool {
	if d == nil || d.done == nil {
		return true
	}
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}
