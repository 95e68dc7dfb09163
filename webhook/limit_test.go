package webhook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// At most n requests are inside the handlers a Limiter wraps at once, counted across them; the
// rest wait, and one whose caller gives up while waiting is answered 503 without reaching a handler.
func TestLimiter(t *testing.T) {
	const n = 3
	var inside, most atomic.Int32
	release := make(chan struct{})
	l := NewLimiter(n)
	inner := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		now := inside.Add(1)
		for {
			m := most.Load()
			if now <= m || most.CompareAndSwap(m, now) {
				break
			}
		}
		<-release
		inside.Add(-1)
	})
	a, b := l.Wrap(inner), l.Wrap(inner)
	var wg sync.WaitGroup
	for i := range 2 * n {
		h := a
		if i%2 == 1 {
			h = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", nil))
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for inside.Load() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	rec := httptest.NewRecorder()
	b.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil).WithContext(ctx))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("a request that gave up waiting: status %d, want 503", rec.Code)
	}
	close(release)
	wg.Wait()
	if got := most.Load(); got != n {
		t.Errorf("at most %d requests inside at once, want exactly %d", got, n)
	}
}
