package wrap

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// selfFencedPrefix starts the detail of the termination message of a driver that wrap stopped
// because its heartbeat could not be renewed: the controller takes that for a node-loss recovery,
// not a failure of the driver (IsSelfFenced).
const selfFencedPrefix = "self-fenced: "

// IsSelfFenced reports whether msg, a termination message of wrap's, records a driver that wrap
// stopped itself for want of a heartbeat.
func IsSelfFenced(msg string) bool {
	if _, ok := ParseTerminationMessage(msg); !ok {
		return false
	}
	_, detail, _ := strings.Cut(msg, "\n")
	return strings.HasPrefix(detail, selfFencedPrefix)
}

func selfFencedDetail(reason, detail string) string {
	return selfFencedPrefix + reason + "; " + detail
}

// startHeartbeat holds the heartbeat when self-fencing is on, and keeps it in the background. The
// returned channel receives why the driver must stop; stop ends the heartbeat.
func (o Options) startHeartbeat(ctx context.Context) (<-chan string, func(), error) {
	if o.SelfFence <= 0 {
		return nil, func() {}, nil
	}
	renewer := o.Renewer
	if renewer == nil {
		r, err := newLeaseRenewer(o.HeartbeatLease, o.SelfFence)
		if err != nil {
			return nil, nil, err
		}
		renewer = r
	}
	h := &heartbeat{renewer: renewer, t: o.SelfFence, now: time.Now, logf: o.logf}
	if err := h.acquire(ctx); err != nil {
		return nil, nil, err
	}
	o.logf("heartbeat Lease %s held; the driver is stopped if it cannot be renewed for %s", o.HeartbeatLease, o.SelfFence)
	hctx, cancel := context.WithCancel(ctx)
	fence := make(chan string, 1)
	go func() {
		if reason := h.keep(hctx); reason != "" {
			fence <- reason
		}
	}()
	return fence, cancel, nil
}

// failedHeartbeat reports that the driver was not started because no heartbeat could be held:
// nothing is recorded, so the kubelet's next start of the container tries again.
func (o Options) failedHeartbeat(cause error) (int, error) {
	return o.notStarted(fmt.Sprintf("self-fencing is on and its heartbeat Lease %s could not be held: %v", o.HeartbeatLease, cause))
}
