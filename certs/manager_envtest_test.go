//go:build testbed

package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

const testNS = "driverset-system"

// TestOnARealAPIServer proves the Kubernetes side on a real etcd and kube-apiserver (the test
// bed's, named by $DRIVERSET_TESTBED_BIN). Missing binaries fail the test: skipping would
// silently prove nothing.
func TestOnARealAPIServer(t *testing.T) {
	bin := os.Getenv("DRIVERSET_TESTBED_BIN")
	if bin == "" {
		t.Fatal("DRIVERSET_TESTBED_BIN is not set: it names the test bed's bin folder (etcd, kube-apiserver), " +
			"e.g. ~/.cache/driverset-testbed/k8s-v1.37.2_etcd-v3.7.3_kwok-v0.8.0_linux-amd64/bin")
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("test bed binary missing: %v", err)
		}
	}
	t.Setenv("KUBEBUILDER_ASSETS", bin)
	// The webhook server logs through controller-runtime's global logger; without one it
	// complains after a while. Nothing here reads those logs.
	ctrllog.SetLogger(logr.Discard())

	// The apiserver's graceful shutdown outlasts envtest's default 20 s.
	env := &envtest.Environment{BinaryAssetsDirectory: bin, ControlPlaneStopTimeout: time.Minute}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting etcd and kube-apiserver: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{testNS, "certs-traffic"} {
		if _, err := cs.CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("racing replicas create the CA Secret once", func(t *testing.T) { testRace(t, cs) })
	t.Run("caBundle is injected into every webhook, idempotently", func(t *testing.T) { testInject(t, cs) })
	t.Run("CA rotation step by step on an injected clock", func(t *testing.T) { testRotationSteps(t, cs) })
	t.Run("serving certificates are renewed before they expire", func(t *testing.T) { testRenewal(t, cs) })
	t.Run("rotations under traffic never fail a handshake", func(t *testing.T) { testRotationUnderTraffic(t, cs) })
}

// logLines is a logger that keeps what it is told, for counting what a Manager did.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{})
}

func (l *logLines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func newTestManager(t *testing.T, cs kubernetes.Interface, secret, webhooks string, edit func(*Options)) *Manager {
	t.Helper()
	o := Options{
		Client: cs, Namespace: testNS, SecretName: secret, ServiceName: "driverset-webhook",
		WebhookConfigName: webhooks, CertDir: t.TempDir(), ExtraHosts: []string{"127.0.0.1"},
	}
	if edit != nil {
		edit(&o)
	}
	m, err := NewManager(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func testRace(t *testing.T, cs kubernetes.Interface) {
	ctx := context.Background()
	races := 0
	for round := range 8 {
		secret := fmt.Sprintf("race-%d", round)
		w, err := cs.CoreV1().Secrets(testNS).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + secret})
		if err != nil {
			t.Fatal(err)
		}
		var logs logLines
		lctx := ctrllog.IntoContext(ctx, logs.logger())
		ms := []*Manager{
			newTestManager(t, cs, secret, "absent", nil),
			newTestManager(t, cs, secret, "absent", nil),
		}
		start := make(chan struct{})
		errs := make([]error, len(ms))
		var wg sync.WaitGroup
		for i, m := range ms {
			wg.Go(func() {
				<-start
				errs[i] = m.EnsureOnce(lctx)
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: replica %d: %v", round, i, err)
			}
		}
		added, other := 0, 0
		for quiet := false; !quiet; {
			select {
			case ev := <-w.ResultChan():
				if ev.Type == watch.Added {
					added++
				} else {
					other++
				}
			case <-time.After(500 * time.Millisecond):
				quiet = true
			}
		}
		w.Stop()
		if added != 1 || other != 0 {
			t.Fatalf("round %d: the Secret was added %d times and changed %d times; want added once, untouched", round, added, other)
		}
		if n := logs.count("created CA secret"); n != 1 {
			t.Fatalf("round %d: %d replicas say they created the Secret", round, n)
		}
		races += logs.count("CA secret created by another replica")

		// Both serve their own certificate, from the one CA.
		sec, err := cs.CoreV1().Secrets(testNS).Get(ctx, secret, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		roots, err := ParseBundle(sec.Data[SecretKeyCACert])
		if err != nil {
			t.Fatal(err)
		}
		var leaves []*x509.Certificate
		for _, m := range ms {
			leaf := mustServing(t, m.o.CertDir)
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots.Pool(), DNSName: "driverset-webhook.driverset-system.svc"}); err != nil {
				t.Fatalf("round %d: a replica's certificate does not chain to the Secret's CA: %v", round, err)
			}
			leaves = append(leaves, leaf)
		}
		if leaves[0].Equal(leaves[1]) {
			t.Fatalf("round %d: the replicas share a serving certificate; each must issue its own", round)
		}
	}
	// Without a single lost create the test proved nothing about the race.
	if races == 0 {
		t.Fatal("in no round did both replicas try to create the Secret")
	}
	t.Logf("%d of 8 rounds were real create races", races)
}

func mustServing(t *testing.T, dir string) *x509.Certificate {
	t.Helper()
	leaf, err := readServing(dir)
	if err != nil || leaf == nil {
		t.Fatalf("no serving certificate in %s: %v", dir, err)
	}
	return leaf
}

// webhookConfig is a MutatingWebhookConfiguration with one webhook per URL, for ConfigMaps in
// the certs-traffic namespace only.
func webhookConfig(name string, urls ...string) *admissionv1.MutatingWebhookConfiguration {
	cfg := &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	fail, none := admissionv1.Fail, admissionv1.SideEffectClassNone
	for i, u := range urls {
		cfg.Webhooks = append(cfg.Webhooks, admissionv1.MutatingWebhook{
			Name:                    fmt.Sprintf("hook%d.%s.certs.test", i, name),
			ClientConfig:            admissionv1.WebhookClientConfig{URL: &u},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          new(int32(5)),
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
					Resources: []string{"configmaps"}},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "certs-traffic"}},
			ObjectSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{"certs-test": name}},
		})
	}
	return cfg
}

func createWebhooks(t *testing.T, cs kubernetes.Interface, cfg *admissionv1.MutatingWebhookConfiguration) {
	t.Helper()
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(context.Background(), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), cfg.Name, metav1.DeleteOptions{})
	})
}

// apiBundles are the caBundles of each webhook of the configuration, as the API holds them now.
func apiBundles(t *testing.T, cs kubernetes.Interface, name string) (*admissionv1.MutatingWebhookConfiguration, []Bundle) {
	t.Helper()
	cfg, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []Bundle
	for _, w := range cfg.Webhooks {
		b, err := ParseBundle(w.ClientConfig.CABundle)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return cfg, out
}

func testInject(t *testing.T, cs kubernetes.Interface) {
	ctx := context.Background()
	createWebhooks(t, cs, webhookConfig("inject", "https://127.0.0.1:1/a", "https://127.0.0.1:1/b"))
	m := newTestManager(t, cs, "inject-ca", "inject", nil)
	if err := m.EnsureOnce(ctx); err != nil {
		t.Fatal(err)
	}
	sec, err := cs.CoreV1().Secrets(testNS).Get(ctx, "inject-ca", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, bundles := apiBundles(t, cs, "inject")
	for i, b := range bundles {
		if len(b) != 1 || !bytes.Equal(b.PEM(), sec.Data[SecretKeyCACert]) {
			t.Errorf("webhook %d trusts %v, want exactly the Secret's CA", i, names(b))
		}
	}
	// A second pass writes nothing.
	if err := m.EnsureOnce(ctx); err != nil {
		t.Fatal(err)
	}
	again, _ := apiBundles(t, cs, "inject")
	if again.ResourceVersion != cfg.ResourceVersion {
		t.Errorf("an unchanged bundle was written again (resourceVersion %s → %s)", cfg.ResourceVersion, again.ResourceVersion)
	}
	// A bundle someone else overwrote is put back, and only that webhook is touched.
	again.Webhooks[1].ClientConfig.CABundle = []byte("not a certificate")
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, again, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := m.EnsureOnce(ctx); err != nil {
		t.Fatal(err)
	}
	_, bundles = apiBundles(t, cs, "inject")
	for i, b := range bundles {
		if !bytes.Equal(b.PEM(), sec.Data[SecretKeyCACert]) {
			t.Errorf("after repair webhook %d trusts %v", i, names(b))
		}
	}
}

// testRotationSteps drives a whole CA rotation on a clock the test moves, and checks the order
// that keeps admission working: bundle first, signer second, old CA out last.
func testRotationSteps(t *testing.T, cs kubernetes.Interface) {
	ctx := context.Background()
	createWebhooks(t, cs, webhookConfig("steps", "https://127.0.0.1:1/a", "https://127.0.0.1:1/b"))
	now := time.Now()
	m := newTestManager(t, cs, "steps-ca", "steps", func(o *Options) {
		o.CAValidity, o.CARenewBefore = 100*time.Hour, 30*time.Hour
		o.ServingValidity, o.RenewBefore = 10*time.Hour, 3*time.Hour
		o.Interval, o.Settle = time.Minute, 10*time.Minute
		o.Now = func() time.Time { return now }
	})
	pass := func() {
		t.Helper()
		if err := m.EnsureOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pass()
	first := m.remembered().active
	check := func(when string, wantBundle []*Authority, wantSigner *Authority) {
		t.Helper()
		_, bundles := apiBundles(t, cs, "steps")
		want := Bundle{}
		for _, a := range wantBundle {
			want = append(want, a.Cert)
		}
		for i, b := range bundles {
			if !bytes.Equal(b.PEM(), mergeBundle(want...).PEM()) {
				t.Errorf("%s: webhook %d trusts %v, want %v", when, i, names(b), names(want))
			}
		}
		leaf := mustServing(t, m.o.CertDir)
		if leaf.CheckSignatureFrom(wantSigner.Cert) != nil {
			t.Errorf("%s: serving certificate is not from %s", when, wantSigner.Cert.Subject.CommonName)
		}
	}
	check("at rest", []*Authority{first}, first)

	now = now.Add(70*time.Hour + time.Minute) // into the CA's renewal window
	pass()
	second := m.remembered().next
	if second == nil {
		t.Fatal("no rotation started in the renewal window")
	}
	check("rotation started", []*Authority{first, second}, first)
	now = now.Add(time.Minute)
	pass() // sees the bundle in the API: the settle clock starts
	check("new CA trusted", []*Authority{first, second}, first)
	now = now.Add(9 * time.Minute)
	pass()
	check("settling", []*Authority{first, second}, first)
	now = now.Add(time.Minute)
	pass()
	check("promoted", []*Authority{first, second}, second)
	now = now.Add(9 * time.Minute)
	pass()
	check("old CA still trusted", []*Authority{first, second}, second)
	now = now.Add(time.Minute)
	pass()
	check("old CA retired", []*Authority{second}, second)
}

func testRenewal(t *testing.T, cs kubernetes.Interface) {
	ctx := context.Background()

	t.Run("injected clock", func(t *testing.T) {
		now := time.Now()
		m := newTestManager(t, cs, "renew-clock-ca", "absent", func(o *Options) {
			o.ServingValidity, o.RenewBefore = 10*time.Hour, 3*time.Hour
			o.Now = func() time.Time { return now }
		})
		if err := m.EnsureOnce(ctx); err != nil {
			t.Fatal(err)
		}
		first := mustServing(t, m.o.CertDir)
		now = now.Add(7*time.Hour - time.Minute)
		if err := m.EnsureOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if !mustServing(t, m.o.CertDir).Equal(first) {
			t.Fatal("renewed before RenewBefore")
		}
		now = now.Add(time.Minute)
		if err := m.EnsureOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if renewed := mustServing(t, m.o.CertDir); renewed.Equal(first) || !renewed.NotAfter.After(first.NotAfter) {
			t.Fatal("not renewed at RenewBefore")
		}
	})

	t.Run("real clock", func(t *testing.T) {
		m := newTestManager(t, cs, "renew-ca", "absent", func(o *Options) {
			o.ServingValidity, o.RenewBefore = 4*time.Second, 2*time.Second
			o.Interval, o.Settle = 250*time.Millisecond, time.Second
			o.CAValidity, o.CARenewBefore = time.Hour, 10*time.Minute
		})
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if err := m.EnsureOnce(ctx); err != nil {
			t.Fatal(err)
		}
		startUntilCleanup(ctx, t, m)
		leaf := mustServing(t, m.o.CertDir)
		renewals := 0
		for deadline := time.Now().Add(12 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			cur, err := readServing(m.o.CertDir)
			if err != nil || cur == nil {
				// The key is renamed into place just before the certificate: a reader can see the
				// new key with the old certificate for an instant. It must not last. "An instant"
				// is the writer's two renames, which a loaded machine can stretch past 100 ms
				// (it did, in CI beside other builds): a pair that stays unusable for 2 s is a
				// writer that left it so.
				for wait := time.Now().Add(2 * time.Second); (err != nil || cur == nil) && time.Now().Before(wait); {
					time.Sleep(20 * time.Millisecond)
					cur, err = readServing(m.o.CertDir)
				}
				if err != nil || cur == nil {
					t.Fatalf("cert dir unreadable mid-renewal for 2 s: %v", err)
				}
			}
			now := time.Now()
			if cur.Equal(leaf) {
				if !now.Before(leaf.NotAfter) {
					t.Fatalf("certificate expired at %v and was still in place at %v", leaf.NotAfter, now)
				}
				continue
			}
			// Renewed: not long before its renewal time (issuance truncates to seconds).
			if now.Before(leaf.NotAfter.Add(-2*time.Second - time.Second)) {
				t.Fatalf("renewed at %v, more than RenewBefore before %v", now, leaf.NotAfter)
			}
			renewals++
			leaf = cur
		}
		if renewals < 3 {
			t.Fatalf("%d renewals in 12 s of 4 s certificates", renewals)
		}
	})
}

// replica is one driverset replica: a Manager and a real controller-runtime webhook server that
// reloads the Manager's files.
type replica struct {
	m    *Manager
	addr string
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startUntilCleanup runs m.Start until ctx ends, and makes the test's cleanup wait for it: a
// renewal still writing into the certificate folder (a t.TempDir) when the test ends failed its
// removal with "directory not empty" (seen in CI, 2026-12-06).
func startUntilCleanup(ctx context.Context, t *testing.T, m *Manager) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Start(ctx) // nil when ctx ends
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// startReplica starts a replica of the "traffic" test whose webhook server listens on port.
func startReplica(ctx context.Context, t *testing.T, cs kubernetes.Interface, port int, logs *logLines) *replica {
	t.Helper()
	m := newTestManager(t, cs, "traffic-ca", "traffic", func(o *Options) {
		o.Interval, o.Settle = 250*time.Millisecond, 2*time.Second
		o.CAValidity, o.CARenewBefore = time.Hour, 10*time.Minute
	})
	ctx = ctrllog.IntoContext(ctx, logs.logger())
	if err := m.EnsureOnce(ctx); err != nil {
		t.Fatal(err)
	}
	srv := crwebhook.NewServer(crwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: m.o.CertDir})
	srv.Register("/allow", &admission.Webhook{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("")
	})})
	go srv.Start(ctx) //nolint:errcheck // ends with ctx
	startUntilCleanup(ctx, t, m)
	r := &replica{m: m, addr: fmt.Sprintf("127.0.0.1:%d", port)}
	r.waitServingCurrent(t, 10*time.Second)
	return r
}

func (r *replica) waitServingCurrent(t *testing.T, timeout time.Duration) {
	t.Helper()
	check := r.m.ServingCurrent(r.addr)
	var err error
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err = check(nil); err == nil {
			return
		}
	}
	t.Fatalf("replica at %s not serving its current certificate: %v", r.addr, err)
}

func testRotationUnderTraffic(t *testing.T, cs kubernetes.Interface) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs logLines
	// Two replicas, each registered as one webhook with failurePolicy Fail: every admission
	// below goes through both.
	p1, p2 := freePort(t), freePort(t)
	createWebhooks(t, cs, webhookConfig("traffic", fmt.Sprintf("https://127.0.0.1:%d/allow", p1), fmt.Sprintf("https://127.0.0.1:%d/allow", p2)))
	r1 := startReplica(ctx, t, cs, p1, &logs)
	r2 := startReplica(ctx, t, cs, p2, &logs)
	replicas := []*replica{r1, r2}

	var handshakes, admitted atomic.Int64
	var failMu sync.Mutex
	var failures []string
	fail := func(format string, args ...any) {
		failMu.Lock()
		defer failMu.Unlock()
		failures = append(failures, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
	}
	issuers := sync.Map{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// A TLS client that verifies each handshake against the caBundle the API holds at that moment.
	for _, r := range replicas {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				cfg, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "traffic", metav1.GetOptions{})
				if err != nil {
					fail("reading the webhook configuration: %v", err)
					continue
				}
				pool := x509.NewCertPool()
				pool.AppendCertsFromPEM(cfg.Webhooks[0].ClientConfig.CABundle)
				conn, err := tls.Dial("tcp", r.addr, &tls.Config{RootCAs: pool, ServerName: "driverset-webhook.driverset-system.svc"})
				if err != nil {
					fail("handshake with %s: %v", r.addr, err)
					continue
				}
				issuers.Store(conn.ConnectionState().PeerCertificates[0].Issuer.CommonName, true)
				conn.Close()
				handshakes.Add(1)
			}
		})
	}
	// The apiserver as client: dry-run creates go through both webhooks (failurePolicy Fail).
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Labels: map[string]string{"certs-test": "traffic"}}}
			if _, err := cs.CoreV1().ConfigMaps("certs-traffic").Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				fail("admission: %v", err)
				continue
			}
			admitted.Add(1)
		}
	})

	activeCA := func() (*caState, bool) {
		sec, err := cs.CoreV1().Secrets(testNS).Get(ctx, "traffic-ca", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, false
		}
		if err != nil {
			t.Fatal(err)
		}
		st, err := decodeState(sec)
		if err != nil {
			t.Fatal(err)
		}
		return &st, true
	}
	// waitRotated waits until the Secret is at rest on a CA other than from, and both replicas
	// serve certificates from it.
	waitRotated := func(from *Authority) *Authority {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			st, ok := activeCA()
			if !ok || st.next != nil || len(st.old) > 0 || st.active.Cert.Equal(from.Cert) {
				continue
			}
			for _, r := range replicas {
				r.waitServingCurrent(t, 10*time.Second)
				if mustServing(t, r.m.o.CertDir).CheckSignatureFrom(st.active.Cert) != nil {
					t.Errorf("rotation at rest but %s serves a certificate from another CA", r.addr)
				}
			}
			_, bundles := apiBundles(t, cs, "traffic")
			for i, b := range bundles {
				if len(b) != 1 || !b.Contains(st.active.Cert) {
					t.Errorf("at rest webhook %d trusts %v, want only %s", i, names(b), st.active.Cert.Subject.CommonName)
				}
			}
			return st.active
		}
		t.Fatal("rotation did not finish in 30 s")
		return nil
	}

	time.Sleep(time.Second)
	st0, _ := activeCA()
	if err := r1.m.Rotate(ctrllog.IntoContext(ctx, logs.logger())); err != nil {
		t.Fatal(err)
	}
	ca1 := waitRotated(st0.active)
	time.Sleep(time.Second)
	// The operator's lever: delete the Secret.
	if err := cs.CoreV1().Secrets(testNS).Delete(ctx, "traffic-ca", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ca2 := waitRotated(ca1)
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()

	for _, f := range failures {
		t.Error(f)
	}
	seen := 0
	for _, ca := range []*Authority{st0.active, ca1, ca2} {
		if _, ok := issuers.Load(ca.Cert.Subject.CommonName); ok {
			seen++
		}
	}
	t.Logf("%d verified handshakes, %d admissions through both webhooks, serving certificates from %d CAs seen, %d promotions",
		handshakes.Load(), admitted.Load(), seen, logs.count(`"step"="promote"`))
	if seen != 3 || handshakes.Load() < 50 || admitted.Load() < 20 {
		t.Errorf("too little traffic to prove anything: %d handshakes, %d admissions, %d of 3 CAs seen", handshakes.Load(), admitted.Load(), seen)
	}
	if n := logs.count(`"step"="promote"`); n != 2 {
		t.Errorf("%d promotions, want 2 (Rotate, then the Secret's deletion)", n)
	}

	t.Run("the readiness check refuses a server with another certificate", func(t *testing.T) {
		other := httptest.NewTLSServer(http.NotFoundHandler())
		defer other.Close()
		if err := r1.m.ServingCurrent(strings.TrimPrefix(other.URL, "https://"))(nil); err == nil {
			t.Fatal("ServingCurrent accepts a server that presents a foreign certificate")
		}
		if err := r1.m.ServingCurrent(r2.addr)(nil); err == nil {
			t.Fatal("ServingCurrent accepts another replica's certificate as its own")
		}
	})
}
