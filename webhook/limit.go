package webhook

import (
	"errors"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"
)

// Limiter bounds the admission requests handled at once, across every handler it wraps, both by
// count and by size. A slot is held only while a request is handled: its body is read before,
// within Timeout, and its answer written after, within Timeout again.
//
// Why size: each request costs the handler about five times its body while it is decoded, copied,
// diffed and answered, and a tenant may send dry-run creates (which the apiserver sends to
// sideEffects None webhooks too) of pods of 2 MiB or more as fast as it likes: 32 of those at once
// took a replica past its 256 MiB memory limit on the test bed
// (TestTenantDryRunFloodCannotExhaustDriverset). So a request larger than budget/n, and than
// 64 KiB, (a spark-submit driver pod is a few KiB) takes its size from a byte budget before its
// body is read, which lets large ones run only a few at once, and one larger than the whole budget
// alone. Small requests need a count slot only, taken after their body is in: a flood of large
// ones waits on the budget without holding the slots other tenants' drivers need.
//
// Why read and write outside the slot: the webhook is reached from the pod network, and a
// caller that sends a request's headers and then its body slowly, or never reads its answer,
// would otherwise hold a slot for as long as it liked; 32 such connections to a replica held every
// slot, and every opted-in submission and new incarnation failed cluster-wide (issue 35,
// TestSlowCallersHoldNoSlot). Now such a caller holds nothing but its connection for at most
// Timeout, and its bytes of the budget when it declared a large body. The bodies read while their
// requests wait for a slot are at most 64 KiB each (what a connection costs anyway, about); the
// bodies of large requests stay under the budget.
//
// A request whose caller gives up first (the apiserver's webhook timeout) is answered 503, which
// the webhook's failurePolicy then decides on.
type Limiter struct {
	// Timeout bounds the reading of a request's body, from when the handler starts (or when a
	// large request has its bytes), and the writing of its answer. DefaultTimeout when 0.
	Timeout time.Duration

	slots  *semaphore.Weighted // one per request
	bytes  *semaphore.Weighted // the size of each large request
	budget int64               // the bytes of large requests handled at once, at most
	small  int64               // the largest request that takes no bytes: budget/n, at most smallMax
}

// DefaultTimeout is the Limiter's Timeout when none is set: the webhooks' timeoutSeconds in
// install.yaml. An apiserver sends a body at once behind its headers and reads the answer at once.
const DefaultTimeout = 5 * time.Second

// smallMax is the largest body read without taking bytes from the budget: each waits for a slot
// in memory, so their size, and not only their number, must stay small.
const smallMax = 64 << 10

// MaxBody is the largest request body read at all: controller-runtime's admission.Webhook refuses
// a larger one.
const MaxBody = 7 << 20

// NewLimiter allows at most n requests at once (at least 1), the large ones among them with
// bodies of at most bytes in all (at least n).
func NewLimiter(n int, bytes int64) *Limiter {
	n = max(n, 1)
	bytes = max(bytes, int64(n))
	return &Limiter{
		slots: semaphore.NewWeighted(int64(n)), bytes: semaphore.NewWeighted(bytes),
		budget: bytes, small: min(bytes/int64(n), smallMax),
	}
}

// weight is what r takes from the byte budget: nothing for a small request, else its body's
// size, at most the whole budget. A body of unknown size takes the whole budget (the apiserver
// always sends the size).
func (l *Limiter) weight(r *http.Request) int64 {
	switch size := r.ContentLength; {
	case size < 0:
		return l.budget
	case size <= l.small:
		return 0
	default:
		return min(size, l.budget)
	}
}

func (l *Limiter) timeout() time.Duration {
	if l.Timeout > 0 {
		return l.Timeout
	}
	return DefaultTimeout
}

// Wrap serves next within the limit: next reads the body from memory and writes its answer there.
func (l *Limiter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if r.ContentLength > MaxBody {
			refuse(w, http.StatusRequestEntityTooLarge, "driverset: admission request over 7 MiB")
			return
		}
		weight := l.weight(r)
		if weight > 0 {
			if err := l.bytes.Acquire(ctx, weight); err != nil {
				refuse(w, http.StatusServiceUnavailable, busyMessage)
				return
			}
			defer l.bytes.Release(weight)
		}
		body, err := readWithin(w, r, l.timeout())
		if err != nil {
			code := http.StatusBadRequest
			if errors.Is(err, errTooLarge) {
				code = http.StatusRequestEntityTooLarge
			} else if isTimeout(err) {
				code = http.StatusRequestTimeout
			}
			refuse(w, code, "driverset: reading the admission request: "+err.Error())
			return
		}
		if err := l.slots.Acquire(ctx, 1); err != nil {
			http.Error(w, busyMessage, http.StatusServiceUnavailable)
			return
		}
		a := newAnswer()
		next.ServeHTTP(a, withBody(r, body))
		l.slots.Release(1)
		a.sendWithin(w, l.timeout())
	})
}

const busyMessage = "driverset: too many admission requests in progress"
