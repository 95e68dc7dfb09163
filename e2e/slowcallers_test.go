//go:build testbed

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/harness"
	"github.com/driverset/driverset/webhook"
)

// slowCallers is how many connections the attacker keeps open: four times driverset's default
// --max-concurrent-admissions (32), which the harness does not change.
const slowCallers = 128

// Attack, issue 35 (High): anyone on the pod network reaches driverset's webhook port, and
// without --webhook-client-ca (the default) nothing checks who calls. The attacker keeps 128 TLS
// connections open that each send the headers of an admission request, declaring a body of 4 KiB,
// and never the body; whenever driverset drops one, it opens another. Meanwhile a tenant's
// spark-submit is admitted and its driver runs in S-0, and an app already running gets its new
// incarnation (the incarnations webhook's failurePolicy is Fail): neither waits for the
// attacker's requests, whose bodies are read before they take a slot.
func TestSlowCallersCannotHoldAdmissionSlots(t *testing.T) {
	ns, other := namespace(t, nil), namespace(t, nil)
	a := app(ns, "recovering")
	a.DriverAnnotations = map[string]string{contract.AnnotationMaxRestarts: "1"}
	running := startApp(t, a, 0)

	attack := startSlowCallers(t, "127.0.0.1:"+strconv.Itoa(bed.driverset.Port), slowCallers)
	waitFor(t, 30*time.Second, fmt.Sprintf("%d slow callers connected", slowCallers), func(context.Context) (bool, error) {
		return attack.open.Load() >= slowCallers, nil
	})
	// Past driverset's --admission-io-timeout (webhook.DefaultTimeout, 5 s), so that the first
	// connections have been dropped and opened again: the attack as it goes on, not only as it
	// starts.
	time.Sleep(6 * time.Second)
	t.Logf("%d slow callers connected, %d dropped by driverset and opened again so far", attack.open.Load(), attack.dropped.Load())

	t.Run("a tenant's spark-submit", func(t *testing.T) {
		plan, err := app(other, "bystander").Plan()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		harness.Submit(t, tenant(t, other), bed.cluster.CheckAlive, plan, nil)
		runningDriverWithin(t, time.Minute, other, contract.NamesFor(plan.DriverPodName), "")
		t.Logf("the tenant's driver admitted and running in S-0 after %s, under attack", time.Since(start).Round(time.Millisecond))
	})
	t.Run("a running app's new incarnation", func(t *testing.T) {
		start := time.Now()
		exitDriver(t, running.pod, 1)
		runningDriverWithin(t, time.Minute, ns, running.names, string(running.pod.UID))
		t.Logf("the new incarnation admitted and running after %s, under attack", time.Since(start).Round(time.Millisecond))
	})
	opened, dropped := attack.stop()
	t.Logf("the attacker opened %d slow connections in all; driverset dropped %d of them", opened, dropped)
}

// Issue 35: no server of the driverset process waits for a request body it does not read. A
// request that declares a body of 100 bytes and never sends it is answered within 2 s, and its
// connection closed, by the probes, the metrics endpoint and the webhook server's other paths.
// Before, each such caller held a connection and a goroutine as long as it stayed connected.
func TestDriversetsServersWaitForNoUnsentBody(t *testing.T) {
	d := bed.driverset
	for _, tc := range []struct {
		name, url string
	}{
		{"probes: /healthz", d.ProbeURL + "/healthz"},
		{"probes: an unknown path", d.ProbeURL + "/nope"},
		{"metrics: /metrics", d.MetricsURL},
		{"webhook server: an unknown path", "https://127.0.0.1:" + strconv.Itoa(d.Port) + "/nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			c, err := dialAttacker(u.Host, u.Scheme == "https")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			_ = c.SetDeadline(start.Add(2 * time.Second))
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\n", u.Path, u.Host)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer within 2 s while the body is not sent: %v", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			t.Logf("answered %d after %s", resp.StatusCode, time.Since(start).Round(time.Millisecond))
			if _, err := br.ReadByte(); err != io.EOF {
				t.Errorf("the connection stayed open after the answer (read: %v)", err)
			}
		})
	}
}

// slowAttack is a set of slow callers kept open until stop.
type slowAttack struct {
	open            atomic.Int32 // connected now
	opened, dropped atomic.Int32 // in all; closed by driverset
	done            chan struct{}
	wg              sync.WaitGroup
	stopOnce        func() (int32, int32)
}

// startSlowCallers keeps n connections to the webhook at addr, each of which sends the headers of
// a POST to one of the six admission entries, declaring a 4 KiB body, and then nothing; one that
// driverset closes is opened again. They are closed at stop or when the test ends.
func startSlowCallers(t *testing.T, addr string, n int) *slowAttack {
	t.Helper()
	a := &slowAttack{done: make(chan struct{})}
	paths := []string{webhook.DriverPath, webhook.DriverEnforcedPath, webhook.ExecutorPath, webhook.IncarnationPath, webhook.CreatesPath, webhook.EventsPath}
	for i := range n {
		a.wg.Go(func() {
			for {
				select {
				case <-a.done:
					return
				default:
				}
				c, err := dialAttacker(addr, true)
				if err != nil {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				a.opened.Add(1)
				a.open.Add(1)
				fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n", paths[i%len(paths)], addr)
				closed := make(chan struct{})
				go func() {
					defer close(closed)
					_, _ = io.Copy(io.Discard, c) // until driverset closes it
				}()
				select {
				case <-a.done:
					c.Close()
					<-closed
					a.open.Add(-1)
					return
				case <-closed:
					c.Close()
					a.open.Add(-1)
					a.dropped.Add(1)
				}
			}
		})
	}
	a.stopOnce = sync.OnceValues(func() (int32, int32) {
		close(a.done)
		a.wg.Wait()
		return a.opened.Load(), a.dropped.Load()
	})
	t.Cleanup(func() { a.stop() })
	return a
}

// stop closes every slow connection and returns how many were opened and how many driverset closed.
func (a *slowAttack) stop() (opened, dropped int32) { return a.stopOnce() }

// dialAttacker connects to addr as a caller on the pod network would: over TLS without trusting,
// or offering, any certificate.
func dialAttacker(addr string, useTLS bool) (net.Conn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	if !useTLS {
		return d.Dial("tcp", addr)
	}
	return tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // the attacker trusts nothing
}
