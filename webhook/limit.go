package webhook

import (
	"net/http"
)

// Limiter lets at most a fixed number of admission requests be handled at once, across every
// handler it wraps. A request over the limit waits for a slot before its body is read, so waiting
// requests cost a goroutine each, not a decoded pod: a flood of creates (dry-run ones included,
// which the apiserver sends to sideEffects None webhooks too) cannot make a replica hold more
// than the limit of pods being admitted. A request whose caller gives up first (the apiserver's
// webhook timeout) is answered 503, which the webhook's failurePolicy then decides on.
type Limiter struct{ slots chan struct{} }

// NewLimiter allows n requests at once (at least 1).
func NewLimiter(n int) *Limiter { return &Limiter{slots: make(chan struct{}, max(n, 1))} }

// Wrap serves next within the limit.
func (l *Limiter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case l.slots <- struct{}{}:
		case <-r.Context().Done():
			http.Error(w, "driverset: too many admission requests in progress", http.StatusServiceUnavailable)
			return
		}
		defer func() { <-l.slots }()
		next.ServeHTTP(w, r)
	})
}
