package webhook

import (
	"net/http"

	"golang.org/x/sync/semaphore"
)

// Limiter bounds the admission requests handled at once, across every handler it wraps, both by
// count and by size. A request waits for its share before its body is read, so waiting requests
// cost a goroutine each, not a decoded pod.
//
// Why size: each request costs the handler about five times its body while it is decoded, copied,
// diffed and answered, and a tenant may send dry-run creates (which the apiserver sends to
// sideEffects None webhooks too) of pods of 2 MiB or more as fast as it likes: 32 of those at once
// took a replica past its 256 MiB memory limit on the test bed
// (TestTenantDryRunFloodCannotExhaustDriverset). So a request larger than budget/n (a
// spark-submit driver pod is a few KiB) also takes its size from a byte budget, which lets large
// ones run only a few at once, and one larger than the whole budget alone. Small requests need a
// count slot only, taken after the bytes: a flood of large ones waits on the budget without
// holding the slots other tenants' drivers need. The bodies handled at once stay under
// budget/n per small request plus the budget.
//
// A request whose caller gives up first (the apiserver's webhook timeout) is answered 503, which
// the webhook's failurePolicy then decides on.
type Limiter struct {
	slots  *semaphore.Weighted // one per request
	bytes  *semaphore.Weighted // the size of each large request
	budget int64               // the bytes of large requests handled at once, at most
	small  int64               // the largest request that takes no bytes: budget/n
}

// NewLimiter allows at most n requests at once (at least 1), the large ones among them with
// bodies of at most bytes in all (at least n).
func NewLimiter(n int, bytes int64) *Limiter {
	n = max(n, 1)
	bytes = max(bytes, int64(n))
	return &Limiter{
		slots: semaphore.NewWeighted(int64(n)), bytes: semaphore.NewWeighted(bytes),
		budget: bytes, small: bytes / int64(n),
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

// Wrap serves next within the limit.
func (l *Limiter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		weight := l.weight(r)
		if weight > 0 {
			if err := l.bytes.Acquire(ctx, weight); err != nil {
				busy(w)
				return
			}
			defer l.bytes.Release(weight)
		}
		if err := l.slots.Acquire(ctx, 1); err != nil {
			busy(w)
			return
		}
		defer l.slots.Release(1)
		next.ServeHTTP(w, r)
	})
}

func busy(w http.ResponseWriter) {
	http.Error(w, "driverset: too many admission requests in progress", http.StatusServiceUnavailable)
}
