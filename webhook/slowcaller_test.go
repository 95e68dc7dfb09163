package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// slowCallerSlots is the limiter's size in TestSlowCallersHoldNoSlot; every shape of slow caller
// opens more connections than that.
const slowCallerSlots = 4

// Issue 35 (High): anyone on the pod network could hold every admission slot with a few
// connections that send a request's headers and then its body slowly or never (the limiter took
// a slot before the body was read, and nothing bounds how long reading it takes), or that never
// read their answer (the slot was held while it was written). The apiserver's calls then waited
// for a slot until the webhook's timeout (5 s in install.yaml), so every opted-in submission and
// every new incarnation failed. Each shape of slow caller here opens more connections than there
// are slots, to a server wrapped as in production; an ordinary review must still be answered well
// within the webhook's timeout, while the slow callers are still connected.
func TestSlowCallersHoldNoSlot(t *testing.T) {
	// The largest request that takes no bytes from the budget: 64 KiB.
	const budget = slowCallerSlots << 16
	for _, tc := range []struct {
		name string
		// attack opens one slow connection to addr.
		attack func(t *testing.T, addr string) net.Conn
	}{
		{"headers, then never the body", func(t *testing.T, addr string) net.Conn {
			return slowRequest(t, addr, 2000, nil)
		}},
		{"headers and part of the body, then never the rest", func(t *testing.T, addr string) net.Conn {
			return slowRequest(t, addr, 2000, []byte(`{"apiVersion":`))
		}},
		{"headers of a body over the budget's share, then never the body", func(t *testing.T, addr string) net.Conn {
			return slowRequest(t, addr, budget, nil)
		}},
		{"a whole request, then never reading the answer", func(t *testing.T, addr string) net.Conn {
			body := review(t, "large-answer")
			return slowRequest(t, addr, int64(len(body)), body)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLimiter(slowCallerSlots, budget)
			l.Timeout = 10 * time.Second // the fix is not that slow callers are dropped soon
			srv := httptest.NewServer(productionWrapped(l))
			defer srv.Close()
			addr := srv.Listener.Addr().String()
			for range 2 * slowCallerSlots {
				c := tc.attack(t, addr)
				defer c.Close()
			}
			time.Sleep(100 * time.Millisecond) // for the slow ones to reach the limiter first
			start := time.Now()
			status, err := post(srv.URL, review(t, "ordinary"), time.Second)
			if err != nil {
				t.Fatalf("with %d slow callers connected, an ordinary review got no answer: %v", 2*slowCallerSlots, err)
			}
			t.Logf("answered %d in %s", status, time.Since(start).Round(time.Millisecond))
			if status != http.StatusOK {
				t.Errorf("an ordinary review was answered %d, want 200", status)
			}
		})
	}
}

// productionWrapped serves admission reviews as serve does (callers, then the limit, then
// controller-runtime's admission.Webhook). The handler allows every review; the one with the UID
// large-answer gets an answer of 8 MiB, more than any socket buffers before a caller reads it.
func productionWrapped(l *Limiter) http.Handler {
	h := admission.HandlerFunc(func(_ context.Context, r admission.Request) admission.Response {
		if r.UID == "large-answer" {
			return admission.Allowed(strings.Repeat("x", 8<<20))
		}
		return admission.Allowed("")
	})
	return Callers{}.Wrap(l.Wrap(&admission.Webhook{Handler: h}))
}

// review is an AdmissionReview of a pod create with the given UID.
func review(t *testing.T, uid string) []byte {
	t.Helper()
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID(uid), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: "ns", Name: "p", Operation: admissionv1.Create,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// slowRequest sends, on a new connection to addr, the headers of a review of size bytes and then
// only sent, leaving the connection open; it reads nothing, through a small receive buffer.
func slowRequest(t *testing.T, addr string, size int64, sent []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
	head := fmt.Sprintf("POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, size)
	if _, err := c.Write(append([]byte(head), sent...)); err != nil {
		t.Fatal(err)
	}
	return c
}

// post sends body to url and returns the answer's status, or an error when none came within wait.
func post(url string, body []byte, wait time.Duration) (int, error) {
	c := &http.Client{Timeout: wait}
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}
