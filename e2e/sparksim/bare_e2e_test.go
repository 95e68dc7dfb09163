//go:build testbed

package sparksim

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/testbed"
)

// TestBareControlPlane runs Spark's own flow — no driverset — on the real control plane with
// KWOK nodes: what spark-submit and the driver create, who owns what, and what a denial does.
// One test bed for all scenarios (a start costs ~15 s); a bed that cannot start fails the test.
func TestBareControlPlane(t *testing.T) {
	c := testbed.StartT(t, testbed.Options{})
	for _, v := range []Version{Spark24, Spark35, Spark41} {
		t.Run("SubmitRunSucceed/"+string(v), func(t *testing.T) { testSubmitRunSucceed(t, c, v) })
	}
	t.Run("DeleteDriverCollectsEverything", func(t *testing.T) { testDeleteDriverCollects(t, c) })
	t.Run("WebhookDenial", func(t *testing.T) { testWebhookDenial(t, c) })
}

func newNamespace(t *testing.T, c *testbed.Cluster, prefix string) string {
	t.Helper()
	ctx := t.Context()
	ns, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitForDefaultServiceAccount(ctx, ns.Name); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// eventually polls cond every 100 ms until it holds, failing the test after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func driverRunning(t *testing.T, c kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, 30*time.Second, "driver pod "+name+" running", func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		pod = p
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == contract.DriverContainerName && cs.State.Running != nil {
				return p.Status.Phase == corev1.PodRunning, nil
			}
		}
		return false, nil
	})
	return pod
}

// checkOwnedByPod asserts Spark's single controller reference to pod.
func checkOwnedByPod(t *testing.T, what string, refs []metav1.OwnerReference, pod *corev1.Pod) {
	t.Helper()
	if len(refs) != 1 || refs[0].APIVersion != "v1" || refs[0].Kind != "Pod" || refs[0].Name != pod.Name ||
		refs[0].UID != pod.UID || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("%s owner references %+v, want exactly one controller reference to pod %s (uid %s)", what, refs, pod.Name, pod.UID)
	}
}

// checkSubmittedObjects waits for spark-submit's Service and ConfigMap and checks their ownership.
func checkSubmittedObjects(t *testing.T, c kubernetes.Interface, plan *Plan, pod *corev1.Pod) {
	t.Helper()
	ns := pod.Namespace
	var svc *corev1.Service
	var cm *corev1.ConfigMap
	eventually(t, 10*time.Second, "the driver Service and ConfigMap", func(ctx context.Context) (bool, error) {
		var err error
		if svc, err = c.CoreV1().Services(ns).Get(ctx, plan.ServiceName, metav1.GetOptions{}); err != nil {
			return false, client404(err)
		}
		if cm, err = c.CoreV1().ConfigMaps(ns).Get(ctx, plan.ConfigMapName, metav1.GetOptions{}); err != nil {
			return false, client404(err)
		}
		return true, nil
	})
	checkOwnedByPod(t, "Service", svc.OwnerReferences, pod)
	checkOwnedByPod(t, "ConfigMap", cm.OwnerReferences, pod)
	// The ports each version's Service has are pinned by TestPlanShapes; here, that the Service
	// the apiserver holds is headless with them.
	if want := len(plan.Service.Spec.Ports); svc.Spec.ClusterIP != corev1.ClusterIPNone || len(svc.Spec.Ports) != want {
		t.Errorf("Service is not headless with %d ports: %+v", want, svc.Spec)
	}
	if plan.Version == Spark41 {
		var managers []string
		for _, m := range svc.ManagedFields {
			managers = append(managers, fmt.Sprintf("%s/%s", m.Manager, m.Operation))
		}
		if !strings.Contains(strings.Join(managers, ","), FieldManager+"/Apply") {
			t.Errorf("4.1's Service was not server-side applied by %s: %v", FieldManager, managers)
		}
	}
}

func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func testSubmitRunSucceed(t *testing.T, c *testbed.Cluster, v Version) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	ns := newNamespace(t, c, "bare-"+strings.ReplaceAll(string(v), ".", ""))
	// A seeded reader and a frozen clock let the test know spark-submit's names in advance.
	now := time.Now()
	app := func() App {
		return App{Version: v, Name: "spark-pi", Namespace: ns, ExecutorInstances: 2,
			Rand: seeded(7), Now: func() time.Time { return now }}
	}
	plan, err := app().Plan()
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	type outcome struct {
		res *Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := Submit(ctx, c.Client, app(), SubmitOptions{WaitAppCompletion: true, Log: &log})
		done <- outcome{res, err}
	}()

	// The pod spark-submit posted runs on a KWOK node.
	pod := driverRunning(t, c.Client, ns, plan.DriverPodName)
	checkSubmittedObjects(t, c.Client, plan, pod)

	d, err := StartDriver(ctx, c.Client, ns, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	if d.AppID() != plan.AppID || d.OwnPod().UID != pod.UID {
		t.Errorf("driver app id %s own pod uid %s, want %s %s", d.AppID(), d.OwnPod().UID, plan.AppID, pod.UID)
	}
	execs, err := d.RequestExecutors(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range execs {
		checkOwnedByPod(t, "executor "+e.Name, e.OwnerReferences, pod)
	}
	if listed, err := d.Executors(ctx); err != nil || len(listed) != 2 {
		t.Errorf("the driver sees %d executors (%v), want 2", len(listed), err)
	}

	select {
	case o := <-done:
		t.Fatalf("spark-submit returned while the driver runs: %+v %v", o.res, o.err)
	default:
	}
	if err := c.TerminateContainer(ctx, ns, pod.Name, contract.DriverContainerName, 0, ""); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil || o.res.ExitCode != 0 || o.res.FinalPhase != corev1.PodSucceeded || o.res.Deleted {
		t.Fatalf("spark-submit: err %v exit %d phase %s deleted %v\n%s", o.err, o.res.ExitCode, o.res.FinalPhase, o.res.Deleted, log.String())
	}
	if o.res.Pod.UID != pod.UID {
		t.Errorf("Submit's pod uid %s, the running pod's %s", o.res.Pod.UID, pod.UID)
	}
	if n := len(o.res.Phases); n == 0 || o.res.Phases[n-1] != corev1.PodSucceeded || !containsPhase(o.res.Phases, corev1.PodRunning) {
		t.Errorf("phases seen %v, want Running … Succeeded", o.res.Phases)
	}
	if !strings.Contains(log.String(), "exit code: 0") {
		t.Errorf("spark-submit did not log the container's exit:\n%s", log.String())
	}
}

func containsPhase(ps []corev1.PodPhase, p corev1.PodPhase) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

func testDeleteDriverCollects(t *testing.T, c *testbed.Cluster) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ns := newNamespace(t, c, "bare-gc")
	res, err := Submit(ctx, c.Client, App{Version: Spark35, Name: "spark-gc", Namespace: ns}, SubmitOptions{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Submit: %v exit %d", err, res.ExitCode)
	}
	pod := driverRunning(t, c.Client, ns, res.Pod.Name)
	checkSubmittedObjects(t, c.Client, res.Plan, pod)
	d, err := StartDriver(ctx, c.Client, ns, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.RequestExecutors(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if execs, err := d.Executors(ctx); err != nil || len(execs) != 2 {
		t.Fatalf("executors before the delete: %d (%v)", len(execs), err)
	}
	start := time.Now()
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		t.Logf("dependents collected %.1fs after the driver pod's deletion", time.Since(start).Seconds())
	}()
	// The garbage collector removes everything the driver pod owned.
	eventually(t, 90*time.Second, "the driver's dependents to be collected", func(ctx context.Context) (bool, error) {
		if _, err := c.Client.CoreV1().Services(ns).Get(ctx, res.Plan.ServiceName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, client404(err)
		}
		for _, cm := range []string{res.Plan.ConfigMapName, d.ExecutorConfigMap()} {
			if _, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, cm, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, client404(err)
			}
		}
		execs, err := d.Executors(ctx)
		return err == nil && len(execs) == 0, err
	})
}

func testWebhookDenial(t *testing.T, c *testbed.Cluster) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ns := newNamespace(t, c, "bare-deny")
	const message = "sparksim test: driver pods are not welcome here"
	url, caBundle, calls := denyingWebhook(t, message)

	name := "sparksim-deny-" + ns
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "deny.sparksim.test",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
					Resources: []string{"pods"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			// Scoped to this namespace's drivers: a Fail webhook must never block other pods.
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{contract.LabelSparkRole: contract.RoleDriver}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](5),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	// Effective once a dry-run driver pod is denied (sideEffects None: dry runs reach the webhook).
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Labels: map[string]string{contract.LabelSparkRole: contract.RoleDriver}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/never-pulled"}}},
	}
	eventually(t, 30*time.Second, "the webhook to take effect", func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "denied the request"), nil
	})

	before := calls.Load()
	res, err := Submit(ctx, c.Client, App{Version: Spark35, Name: "spark-denied", Namespace: ns}, SubmitOptions{WaitAppCompletion: true})
	want := `admission webhook "deny.sparksim.test" denied the request: ` + message
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Submit error %v, want the denial %q", err, want)
	}
	if res.ExitCode != 1 {
		t.Errorf("exit code %d, want 1", res.ExitCode)
	}
	if calls.Load() == before {
		t.Errorf("the webhook was not called for the driver pod")
	}
	// Nothing else exists: no pod, no Service, no ConfigMap of this app.
	if _, err := c.Client.CoreV1().Pods(ns).Get(ctx, res.Plan.DriverPodName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("driver pod: %v", err)
	}
	svcs, err := c.Client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(svcs.Items) != 0 {
		t.Errorf("services after the denial: %d (%v)", len(svcs.Items), err)
	}
	cms, err := c.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		if cm.Name != "kube-root-ca.crt" {
			t.Errorf("configmap %s exists after the denial", cm.Name)
		}
	}
}

// denyingWebhook serves, on 127.0.0.1 with a freshly generated CA and serving certificate, a
// validating webhook that denies every request with message. It returns its URL, the CA bundle
// and a counter of the reviews it answered.
func denyingWebhook(t *testing.T, message string) (string, []byte, *atomic.Int64) {
	t.Helper()
	caPEM, cert := selfSignedServing(t)
	calls := &atomic.Int64{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		calls.Add(1)
		review.Response = &admissionv1.AdmissionResponse{
			UID: review.Request.UID, Allowed: false,
			Result: &metav1.Status{Code: http.StatusForbidden, Message: message},
		}
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL + "/deny", caPEM, calls
}

// selfSignedServing makes a CA and a serving certificate for 127.0.0.1 signed by it.
func selfSignedServing(t *testing.T) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sparksim test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}
}

// syncBuffer is a bytes.Buffer safe for the Submit goroutine and the test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
