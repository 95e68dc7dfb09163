package webhook

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// A slow caller is answered and dropped once Timeout has passed, whatever it declared: 408 and
// the connection closed. One that declared a large body gives its bytes of the budget back then,
// so the next large request is handled.
func TestSlowCallersAreDroppedAfterTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	const budget = slowCallerSlots << 16
	for _, tc := range []struct {
		name string
		size int64
		sent []byte
	}{
		{"headers, then never the body", 2000, nil},
		{"part of the body, then never the rest", 2000, []byte(`{"apiVersion":`)},
		{"headers of a body of the whole budget, then never the body", budget, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLimiter(slowCallerSlots, budget)
			l.Timeout = timeout
			srv := httptest.NewServer(productionWrapped(l))
			defer srv.Close()
			start := time.Now()
			c := slowRequest(t, srv.Listener.Addr().String(), tc.size, tc.sent)
			defer c.Close()
			_ = c.SetReadDeadline(start.Add(5 * time.Second))
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			took := time.Since(start)
			if resp.StatusCode != http.StatusRequestTimeout {
				t.Errorf("answered %d, want 408", resp.StatusCode)
			}
			if took < timeout || took > timeout+2*time.Second {
				t.Errorf("answered after %s, want soon after the timeout of %s", took.Round(time.Millisecond), timeout)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Errorf("the connection stayed open after the answer (read: %v)", err)
			}
			// A large review, which needs the whole budget.
			large := review(t, "large")
			large = append(large, bytes.Repeat([]byte(" "), budget-len(large))...)
			if status, err := post(srv.URL, large, time.Second); err != nil || status != http.StatusOK {
				t.Errorf("a large review after the slow caller: %d, %v; want 200", status, err)
			}
		})
	}
}

// The deadlines bound one request's reading and writing only: a connection kept alive between
// requests for longer than Timeout still serves the next one.
func TestConnectionOutlivesItsRequestsDeadlines(t *testing.T) {
	const timeout = 200 * time.Millisecond
	l := NewLimiter(slowCallerSlots, slowCallerSlots<<16)
	l.Timeout = timeout
	srv := httptest.NewServer(productionWrapped(l))
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	body := review(t, "kept-alive")
	for i := range 3 {
		if i > 0 {
			time.Sleep(2 * timeout)
		}
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d on the connection: %v", i+1, err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(answer, []byte(`"allowed":true`)) {
			t.Fatalf("request %d on the connection: %d %q, want 200 and the review allowed", i+1, resp.StatusCode, answer)
		}
	}
}

// A declared body over MaxBody is refused at once, unread, and the connection closed.
func TestBodyOverMaxIsRefusedUnread(t *testing.T) {
	srv := httptest.NewServer(productionWrapped(NewLimiter(slowCallerSlots, slowCallerSlots<<16)))
	defer srv.Close()
	c := slowRequest(t, srv.Listener.Addr().String(), MaxBody+1, nil)
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
		t.Errorf("answered %d (close %v), want 413 and the connection closed", resp.StatusCode, resp.Close)
	}
}

// A caller that does not read its answer has it cut off once Timeout has passed: driverset
// closes the connection, and lets go of the answer, rather than wait as long as the caller likes.
func TestAnswerNotReadIsCutOffAfterTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	l := NewLimiter(slowCallerSlots, slowCallerSlots<<16)
	l.Timeout = timeout
	srv := httptest.NewUnstartedServer(productionWrapped(l))
	closed := make(chan struct{}, 1)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed <- struct{}{}
		}
	}
	srv.Start()
	defer srv.Close()
	body := review(t, "large-answer")
	start := time.Now()
	c := slowRequest(t, srv.Listener.Addr().String(), int64(len(body)), body)
	defer c.Close()
	select {
	case <-closed:
		t.Logf("driverset closed the connection after %s", time.Since(start).Round(time.Millisecond))
	case <-time.After(timeout + 2*time.Second):
		t.Fatalf("the connection of a caller that reads no answer was still open after %s", time.Since(start).Round(time.Millisecond))
	}
}
