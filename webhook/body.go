package webhook

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

var errTooLarge = errors.New("body over 7 MiB")

// readWithin reads r's body, at most MaxBody, with the connection's read deadline d from now.
// Once the body is in, the deadline is cleared: the connection may stay open for the caller's next
// request. After a failed read it stays, so that the server, which reads what is left of a body
// before it closes the request, gives up at once. A body of known size over smallMax (its bytes of
// the budget are taken) is read into a buffer of that size; a small one grows as it arrives, so a
// caller that declares a body and sends none costs no buffer.
//
// Under a ResponseWriter that has no deadlines (a test's recorder) the body is read without one.
func readWithin(w http.ResponseWriter, r *http.Request, d time.Duration) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(d))
	b, err := readBody(r)
	if err == nil {
		_ = rc.SetReadDeadline(time.Time{})
	}
	return b, err
}

func readBody(r *http.Request) ([]byte, error) {
	if size := r.ContentLength; size > smallMax {
		b := make([]byte, size)
		_, err := io.ReadFull(r.Body, b)
		return b, err
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if len(b) > MaxBody {
		return nil, errTooLarge
	}
	return b, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// withBody is r with its body read from memory.
func withBody(r *http.Request, body []byte) *http.Request {
	c := *r
	c.Body = &drained{b: body}
	if c.ContentLength < 0 {
		c.ContentLength = int64(len(body))
	}
	return &c
}

// drained reads b once and then lets it go, so that the handler's own copy of the body is not
// held twice while the request is handled.
type drained struct{ b []byte }

func (d *drained) Read(p []byte) (int, error) {
	if len(d.b) == 0 {
		d.b = nil
		return 0, io.EOF
	}
	n := copy(p, d.b)
	d.b = d.b[n:]
	return n, nil
}

func (d *drained) Close() error { d.b = nil; return nil }

// answer is a handler's answer kept in memory, to be sent once the handler's slot is free.
type answer struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func newAnswer() *answer { return &answer{header: http.Header{}} }

func (a *answer) Header() http.Header { return a.header }

func (a *answer) WriteHeader(code int) {
	if a.code == 0 {
		a.code = code
	}
}

func (a *answer) Write(p []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	return a.body.Write(p)
}

// sendWithin writes the answer to w with the connection's write deadline d from now, all of it
// onto the network (Flush) before the deadline is cleared for the connection's next request.
func (a *answer) sendWithin(w http.ResponseWriter, d time.Duration) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(d))
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	h := w.Header()
	for k, v := range a.header {
		h[k] = v
	}
	h.Set("Content-Length", strconv.Itoa(a.body.Len()))
	w.WriteHeader(max(a.code, http.StatusOK))
	if _, err := w.Write(a.body.Bytes()); err != nil {
		return
	}
	_ = rc.Flush()
}

// refuse answers code and msg without reading (the rest of) the request's body, and closes the
// connection after. Without the read deadline it sets, the server would first read what is left
// of the body, up to 256 KiB, for as long as the caller took to send it: forever, for one that
// never does.
func refuse(w http.ResponseWriter, code int, msg string) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	w.Header().Set("Connection", "close")
	http.Error(w, msg, code)
}
