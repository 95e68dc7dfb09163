package webhook

import (
	"net/http"
	"time"
)

// Bodiless serves h, which reads no request body (probes, metrics, profiles, an unknown path),
// so that no server ever waits for one. net/http reads what is left of an unread body, up to
// 256 KiB, before it finishes a request, with no deadline of its own (controller-runtime's servers
// set only ReadHeaderTimeout): a caller that declared a body and never sent it held a goroutine
// and a connection for as long as it stayed connected, and any number of them could. A request
// that declares a body is answered by h without it, and its connection closed.
//
// Not a server-wide ReadTimeout: that would also cancel the context of any handler running
// longer (net/http's background read of the connection fails at the deadline), a CPU profile
// of 30 s among them, and controller-runtime's servers take none.
func Bodiless(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
			w.Header().Set("Connection", "close")
			c := *r
			c.Body, c.ContentLength = http.NoBody, 0
			r = &c
		}
		h.ServeHTTP(w, r)
	})
}
