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
	l := NewLimiter(n, 1<<30)
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

// A request larger than the budget over n takes its size from the budget, at most the whole of it:
// small requests run n at once, large ones fewer, one larger than the budget (or of unknown size)
// alone.
func TestLimiterWeighsRequestsBySize(t *testing.T) {
	const n, budget = 4, 100 // each request weighs at least 25
	for _, tc := range []struct {
		name string
		size int64
		most int32
	}{
		{"small requests run n at once", 10, 4},
		{"requests of the budget over n run n at once", 25, 4},
		{"requests of 40 bytes run 2 at once", 40, 2},
		{"requests of half the budget run 2 at once", 50, 2},
		{"a request over half the budget runs alone", 51, 1},
		{"a request over the whole budget still runs, alone", 1000, 1},
		{"a request of unknown size runs alone", -1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mostAtOnce(NewLimiter(n, budget), tc.size, 2*n); got != tc.most {
				t.Errorf("%d requests of %d bytes inside at once at most, want %d", got, tc.size, tc.most)
			}
		})
	}
}

// Small requests are not held behind large ones: while a large request takes the whole budget and
// more large ones wait for it, small ones still take the other n-1 slots.
func TestLimiterLetsSmallRequestsPastLargeOnes(t *testing.T) {
	const n, budget = 4, 100
	l := NewLimiter(n, budget)
	release := make(chan struct{})
	var large, small atomic.Int32
	h := l.Wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if r.ContentLength > budget/n {
			large.Add(1)
		} else {
			small.Add(1)
		}
		<-release
	}))
	send := func(size int64) {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.ContentLength = size
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	var wg sync.WaitGroup
	waitFor := func(c *atomic.Int32, want int32) {
		for deadline := time.Now().Add(5 * time.Second); c.Load() < want && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	for range 3 {
		wg.Go(func() { send(budget) })
	}
	waitFor(&large, 1)
	time.Sleep(20 * time.Millisecond) // the other two large ones wait for the budget
	for range n {
		wg.Go(func() { send(1) })
	}
	waitFor(&small, n-1)
	time.Sleep(50 * time.Millisecond) // time for any more to get in, wrongly
	if l, s := large.Load(), small.Load(); l != 1 || s != n-1 {
		t.Errorf("inside: %d large and %d small requests, want 1 large (it takes the whole budget) and %d small", l, s, n-1)
	}
	close(release)
	wg.Wait()
}

// mostAtOnce sends k requests of size bytes at once through l and returns how many were inside
// at most; each stays inside until k have arrived or 50 ms have passed with none arriving.
func mostAtOnce(l *Limiter, size int64, k int) int32 {
	var inside, most, arrived atomic.Int32
	h := l.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		now := inside.Add(1)
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
		for last := arrived.Load(); ; {
			time.Sleep(50 * time.Millisecond)
			if a := arrived.Load(); a == last || a == int32(k) {
				break
			} else {
				last = a
			}
		}
		inside.Add(-1)
	}))
	var wg sync.WaitGroup
	for range k {
		wg.Go(func() {
			r := httptest.NewRequest(http.MethodPost, "/", nil)
			r.ContentLength = size
			arrived.Add(1)
			h.ServeHTTP(httptest.NewRecorder(), r)
		})
	}
	wg.Wait()
	return most.Load()
}
