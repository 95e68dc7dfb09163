package harness

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// A watch through the proxy arrives Lag late, each event as late as the one before; anything else
// arrives at once.
func TestLaggingAPIServerDelaysWatchesOnly(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			fmt.Fprintln(w, "listed")
			return
		}
		for _, e := range []string{"first", "second"} {
			fmt.Fprintln(w, e)
			w.(http.Flusher).Flush()
			time.Sleep(200 * time.Millisecond)
		}
	}))
	defer upstream.Close()
	const lag = 600 * time.Millisecond
	p, err := StartLaggingAPIServer(&rest.Config{Host: upstream.URL}, lag, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	cfg, err := clientcmd.LoadFromFile(p.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	base := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].Server

	start := time.Now()
	resp, err := http.Get(base + "/api/v1/pods")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if d := time.Since(start); d >= lag {
		t.Errorf("a list took %v through the proxy, want it at once", d)
	}

	start = time.Now()
	resp, err = http.Get(base + "/api/v1/pods?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for i, want := range []string{"first", "second"} {
		if !lines.Scan() {
			t.Fatalf("the watch ended before %q: %v", want, lines.Err())
		}
		got, at := lines.Text(), time.Since(start)
		if got != want {
			t.Errorf("event %d is %q, want %q", i, got, want)
		}
		if earliest := lag + time.Duration(i)*200*time.Millisecond; at < earliest {
			t.Errorf("event %q arrived after %v, want no earlier than %v", got, at, earliest)
		}
	}
}
