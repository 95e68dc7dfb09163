//go:build testbed

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/certs"
	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
	"github.com/driverset/driverset/e2e/harness"
	"github.com/driverset/driverset/e2e/sparksim"
)

// What serve's flags default to, and what the manifests name.
const (
	systemNamespace   = "driverset-system"
	caSecretName      = "driverset-ca"
	webhookConfigName = "driverset"
	leaseName         = "driverset.driverset.dev"
)

// Issue 5, item 2: with --self-managed-tls driverset makes its own CA, writes it into the
// webhooks' caBundle, and rotates it — forced the operator's way, by deleting the CA Secret —
// while spark-submit keeps posting drivers, not one of which is refused.
func TestSelfManagedTLSRotatesWithoutAFailedSubmission(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	applySelfManagedRBAC(t)

	// The self-managed replica takes bed.driverset's port, which the webhook URLs name.
	port := bed.driverset.Port
	if err := bed.driverset.Stop(); err != nil {
		t.Fatal(err)
	}
	var sm *harness.Driverset
	t.Cleanup(func() {
		// Stopped first: it would otherwise put its own CA back into the caBundle.
		if err := sm.Stop(); err != nil {
			t.Error(err)
		}
		restoreSharedDriverset(t, true, nil)
		err := kube().CoreV1().Secrets(systemNamespace).Delete(context.Background(), caSecretName, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete the CA Secret: %v", err)
		}
	})
	dir := filepath.Join(bed.dir, "self-managed-tls")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	var err error
	sm, err = harness.Start(ctx, harness.Options{
		Binary: bed.binary, Kubeconfig: bed.cluster.KubeconfigPath, Dir: dir, Port: port,
		ServiceAccount: "driverset-system/driverset", SelfManagedTLS: true, Alive: bed.cluster.CheckAlive,
		Args: append(slices.Clone(driversetArgs), "--webhook-cert-extra-hosts=127.0.0.1", "--cert-check-interval=1s"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("self-managed driverset ready after %s (log %s)", time.Since(started).Round(time.Millisecond), sm.LogPath)

	// The webhooks trust exactly the CA in the Secret, and the served certificate chains to it.
	var first *x509.Certificate
	watchTLS := tlsWatcher(t, port)
	waitFor(t, 30*time.Second, "every caBundle holding the Secret's CA alone", func(ctx context.Context) (bool, error) {
		st := watchTLS(ctx)
		if !st.stable() || !st.servedVerifies {
			return false, nil
		}
		first = st.active
		return true, nil
	})
	if err := harness.WaitWebhookActive(ctx, bed.cluster.Config, bed.cluster.CheckAlive); err != nil {
		t.Fatal(err)
	}

	stream := startStream(t, ns, "rot", 200*time.Millisecond)
	time.Sleep(2 * time.Second)
	rotationStart := time.Now()
	if err := kube().CoreV1().Secrets(systemNamespace).Delete(ctx, caSecretName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var second *x509.Certificate
	waitFor(t, 90*time.Second, "the CA rotation (caBundle holds a new CA only; the served certificate chains to it)", func(ctx context.Context) (bool, error) {
		st := watchTLS(ctx)
		if !st.stable() || !st.servedVerifies || st.active.Equal(first) {
			return false, nil
		}
		second = st.active
		return true, nil
	})
	rotated := time.Now()
	// A few more seconds: the first submissions after the old CA left the bundle.
	time.Sleep(3 * time.Second)
	results := stream.stop()
	t.Logf("CA %s replaced by %s in %s", caName(first), caName(second), rotated.Sub(rotationStart).Round(time.Millisecond))

	before, during, after := 0, 0, 0
	for _, r := range results {
		switch {
		case r.at.Before(rotationStart):
			before++
		case r.at.Before(rotated):
			during++
		default:
			after++
		}
	}
	t.Logf("submissions: %d before the Secret was deleted, %d during the rotation, %d after it", before, during, after)
	checkStream(t, results, 30)
	if before == 0 || during < 20 || after == 0 {
		t.Errorf("the submissions do not cover the rotation: %d before, %d during, %d after", before, during, after)
	}
	// The StatefulSet controller's creates of S-0 went through the incarnation webhook too
	// (failurePolicy Fail): none of them may have been refused either.
	evs, err := kube().CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		t.Errorf("%s %s: FailedCreate: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
	}
}

// tlsState is one look at the self-managed TLS: the Secret, the caBundles, the served certificate.
type tlsState struct {
	active, next   *x509.Certificate
	old            int
	bundles        []certs.Bundle // one per webhook
	served         *x509.Certificate
	servedVerifies bool // the served certificate verifies for 127.0.0.1 against the active CA alone
	err            error
}

// stable: no rotation under way, and every webhook trusts the active CA and nothing else.
func (s tlsState) stable() bool {
	if s.err != nil || s.active == nil || s.next != nil || s.old > 0 || len(s.bundles) == 0 {
		return false
	}
	for _, b := range s.bundles {
		if len(b) != 1 || !b[0].Equal(s.active) {
			return false
		}
	}
	return true
}

func (s tlsState) String() string {
	if s.err != nil {
		return s.err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "secret: active %s", caName(s.active))
	if s.next != nil {
		fmt.Fprintf(&b, ", next %s", caName(s.next))
	}
	if s.old > 0 {
		fmt.Fprintf(&b, ", %d old", s.old)
	}
	for i, bundle := range s.bundles {
		names := make([]string, len(bundle))
		for j, c := range bundle {
			names[j] = caName(c)
		}
		fmt.Fprintf(&b, "; caBundle %d: %s", i, strings.Join(names, "+"))
	}
	if s.served != nil {
		fmt.Fprintf(&b, "; serving a certificate from %s", s.served.Issuer.CommonName)
	}
	return b.String()
}

// tlsWatcher reads the TLS state for the replica on port, logging each change with its time.
func tlsWatcher(t *testing.T, port int) func(ctx context.Context) tlsState {
	t.Helper()
	start, last := time.Now(), ""
	return func(ctx context.Context) tlsState {
		st := readTLS(ctx, port)
		if s := st.String(); s != last {
			t.Logf("+%s %s", time.Since(start).Round(time.Millisecond), s)
			last = s
		}
		return st
	}
}

func readTLS(ctx context.Context, port int) tlsState {
	var st tlsState
	sec, err := kube().CoreV1().Secrets(systemNamespace).Get(ctx, caSecretName, metav1.GetOptions{})
	if err != nil {
		st.err = fmt.Errorf("CA Secret: %w", err)
		return st
	}
	pem := func(key string) *x509.Certificate {
		b, err := certs.ParseBundle(sec.Data[key])
		if err != nil || len(b) == 0 {
			return nil
		}
		return b[0]
	}
	st.active, st.next = pem(certs.SecretKeyCACert), pem(certs.SecretKeyNextCert)
	if old, err := certs.ParseBundle(sec.Data[certs.SecretKeyOldCerts]); err == nil {
		st.old = len(old)
	}
	cfg, err := kube().AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, webhookConfigName, metav1.GetOptions{})
	if err != nil {
		st.err = err
		return st
	}
	for _, w := range cfg.Webhooks {
		b, err := certs.ParseBundle(w.ClientConfig.CABundle)
		if err != nil {
			st.err = fmt.Errorf("webhook %s: caBundle: %w", w.Name, err)
			return st
		}
		st.bundles = append(st.bundles, b)
	}
	if st.served, err = servedCertificate(ctx, port); err != nil {
		st.err = err
		return st
	}
	if st.active != nil {
		_, err := st.served.Verify(x509.VerifyOptions{Roots: certs.Bundle{st.active}.Pool(), DNSName: "127.0.0.1"})
		st.servedVerifies = err == nil
	}
	return st
}

// servedCertificate is the leaf the webhook server on port presents.
func servedCertificate(ctx context.Context, port int) (*x509.Certificate, error) {
	// The chain is verified by the caller, against the CA it expects.
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}} //nolint:gosec
	conn, err := d.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	peer := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(peer) == 0 {
		return nil, errors.New("no certificate served")
	}
	return peer[0], nil
}

func caName(c *x509.Certificate) string {
	if c == nil {
		return "none"
	}
	serial := fmt.Sprintf("%x", c.SerialNumber)
	return fmt.Sprintf("%s(%s)", c.Subject.CommonName, serial[:min(6, len(serial))])
}

// applySelfManagedRBAC applies what the self-managed overlay grants beyond the local one (the
// CA Secret, the caBundle patch), as an install does; removed when the test ends.
func applySelfManagedRBAC(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	kubectl := filepath.Join(bed.cluster.BinDir, "kubectl")
	local, err := harness.Render(ctx, kubectl, "overlays/local")
	if err != nil {
		t.Fatal(err)
	}
	self, err := harness.Render(ctx, kubectl, "overlays/self-managed")
	if err != nil {
		t.Fatal(err)
	}
	key := func(u *unstructured.Unstructured) string {
		return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
	}
	have := map[string]bool{}
	for _, u := range local {
		have[key(u)] = true
	}
	var extra []*unstructured.Unstructured
	for _, u := range self {
		if u.GroupVersionKind().Group == "rbac.authorization.k8s.io" && !have[key(u)] {
			extra = append(extra, u)
		}
	}
	if len(extra) == 0 {
		t.Fatal("the self-managed overlay grants nothing beyond the local one")
	}
	if err := harness.Apply(ctx, bed.cluster.Config, extra); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := client.New(bed.cluster.Config, client.Options{})
		if err != nil {
			t.Error(err)
			return
		}
		for _, u := range extra {
			if err := c.Delete(context.Background(), u); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s: %v", key(u), err)
			}
		}
	})
}

// restoreSharedDriverset leaves the shared setup as TestMain made it: bed.driverset serving on
// its port (restarted when restart), the webhook configuration pointing at it with its CA, and
// bed.driverset the controller's leader again. beforeLeader, when given, runs once the webhooks
// point at bed.driverset: it stops whatever else might hold the lease.
func restoreSharedDriverset(t *testing.T, restart bool, beforeLeader func()) {
	t.Helper()
	ctx := context.Background()
	once := sync.OnceFunc(func() {
		if beforeLeader != nil {
			beforeLeader()
		}
	})
	defer once() // also when a step below fails the test
	if restart {
		d, err := startDriverset(ctx, bed.driverset)
		if err != nil {
			t.Fatalf("restart driverset: %v", err)
		}
		bed.driverset = d
	}
	kubectl := filepath.Join(bed.cluster.BinDir, "kubectl")
	if err := harness.InstallLocal(ctx, bed.cluster.Config, bed.cluster.CheckAlive, kubectl, bed.driverset.Port, bed.driverset.CA.CertPEM); err != nil {
		t.Fatalf("restore the webhook configuration: %v", err)
	}
	once()
	// The lease of a stopped replica is not released: it runs out first (15 s).
	waitFor(t, 60*time.Second, "the shared driverset leading again", func(context.Context) (bool, error) {
		return isLeader(bed.driverset), nil
	})
}

// isLeader reads a replica's leader-election gauge (its /metrics).
func isLeader(d *harness.Driverset) bool {
	if d.MetricsURL == "" {
		return false
	}
	body, err := metricsOf(d)
	if err != nil {
		return false
	}
	series := `leader_election_master_status{name="` + leaseName + `"} 1`
	return slices.Contains(strings.Split(body, "\n"), series)
}

// pointWebhooksAt points every webhook URL at 127.0.0.1:port, leaving the rest as it is.
func pointWebhooksAt(t *testing.T, port int) {
	t.Helper()
	ctx := context.Background()
	hooks := kube().AdmissionregistrationV1().MutatingWebhookConfigurations()
	cfg, err := hooks.Get(ctx, webhookConfigName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Webhooks {
		cc := &cfg.Webhooks[i].ClientConfig
		if cc.URL == nil {
			t.Fatalf("webhook %s has no URL", cfg.Webhooks[i].Name)
		}
		u, err := url.Parse(*cc.URL)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = "127.0.0.1:" + strconv.Itoa(port)
		cc.URL = new(u.String())
	}
	if _, err := hooks.Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// stream is spark-submit run again and again (waitAppCompletion=false), one opted-in app every
// period, each result checked to be a gated placeholder: admitted and converted.
type stream struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	results []streamed
}

type streamed struct {
	pod  string
	at   time.Time
	took time.Duration
	err  error // refused, or admitted without conversion
}

func startStream(t *testing.T, ns, prefix string, period time.Duration) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &stream{cancel: cancel, done: make(chan struct{})}
	t.Cleanup(func() { s.stop() })
	go func() {
		defer close(s.done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for i := 0; ; i++ {
			s.submitOne(app(ns, fmt.Sprintf("%s-%03d", prefix, i)))
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// submitOne makes one submission and records its result. It is not cut short when the stream
// stops: the submission in flight then is the one that meets the change the scenario makes, and
// dropping it would hide a failure. stop waits for it (20 s at most).
func (s *stream) submitOne(a sparksim.App) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := sparksim.Submit(ctx, kube(), a, sparksim.SubmitOptions{})
	r := streamed{at: start, took: time.Since(start), err: err}
	if err == nil {
		p := res.Pod
		r.pod = p.Name
		if p.Labels[contract.LabelPlaceholder] != "true" || !convert.HasGate(&p.Spec, contract.GatePlaceholder) {
			r.err = fmt.Errorf("admitted but not converted: labels %v, gates %v", p.Labels, p.Spec.SchedulingGates)
		}
	}
	s.mu.Lock()
	s.results = append(s.results, r)
	s.mu.Unlock()
}

// stop ends the stream and returns every result.
func (s *stream) stop() []streamed {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.results)
}

// checkStream fails the test for every failed submission, or for fewer than least in all.
func checkStream(t *testing.T, results []streamed, least int) {
	t.Helper()
	var failed int
	var longest, total time.Duration
	for _, r := range results {
		total += r.took
		longest = max(longest, r.took)
		if r.err != nil {
			failed++
			t.Errorf("submission at %s failed: %v", r.at.Format("15:04:05.000"), r.err)
		}
	}
	if len(results) == 0 {
		t.Fatal("no submission was made")
	}
	t.Logf("%d submissions, %d admitted and converted, %d failed; each took %s on average, %s at most",
		len(results), len(results)-failed, failed, (total / time.Duration(len(results))).Round(time.Millisecond), longest.Round(time.Millisecond))
	if len(results) < least {
		t.Errorf("only %d submissions, want at least %d", len(results), least)
	}
}
