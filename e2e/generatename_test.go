//go:build testbed

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/driverset/driverset/certs"
)

// What driverset's refusal of a driver pod without a name rests on, asked of the test bed's
// apiserver: a mutating webhook sees a generateName pod with no name (the apiserver picks it after
// mutating admission), so a seal made there could cover no name. And the way not taken, naming the
// pod in the webhook: whether the apiserver keeps a name a mutating webhook sets on such a create.
func TestGenerateNameIsPickedAfterMutatingAdmission(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	const label = "test.driverset.dev/name-it"

	var mu sync.Mutex
	var seen []string // the name each review carried, in its object
	hookURL, caPEM := nameSettingWebhook(t, func(review *admissionv1.AdmissionReview) []byte {
		var pod corev1.Pod
		if err := json.Unmarshal(review.Request.Object.Raw, &pod); err != nil {
			return nil
		}
		mu.Lock()
		seen = append(seen, pod.Name)
		mu.Unlock()
		if pod.Name != "" {
			return nil
		}
		patch, _ := json.Marshal([]map[string]string{{"op": "add", "path": "/metadata/name", "value": pod.GenerateName + "named-by-webhook"}})
		return patch
	})
	none, fail := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Fail
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "name-it." + ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "name-it.test.driverset.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &hookURL, CABundle: caPEM},
			Rules:                   []admissionregistrationv1.RuleWithOperations{podCreates()},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{label: "true"}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          ptr.To[int32](5),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	hooks := kube().AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := hooks.Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hooks.Delete(context.Background(), cfg.Name, metav1.DeleteOptions{}) })

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "gen-", Labels: map[string]string{label: "true"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "probe"}}},
	}
	calls := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
	// The apiserver calls a new webhook configuration once its informer has it: probe with dry-runs.
	waitFor(t, 30*time.Second, "the webhook called on a generateName create", func(ctx context.Context) (bool, error) {
		_, err := kube().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && len(calls()) > 0, nil
	})
	before := len(calls())
	got, err := kube().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	names := calls()[before:]
	t.Logf("the webhook saw the names %q; the pod was stored as %q", names, got.Name)
	if len(names) == 0 || names[0] != "" {
		t.Errorf("the webhook saw the generateName pod named %q: the apiserver picks the name before mutating admission", names)
	}
	if got.Name != "gen-named-by-webhook" {
		t.Errorf("the apiserver stored the pod as %q, not under the name the webhook set (docs/design.md says it keeps it)", got.Name)
	}
}

// nameSettingWebhook serves, from this process over TLS on 127.0.0.1, a mutating webhook that
// answers each review with patch(review) (nil: no change); it returns its URL and CA.
func nameSettingWebhook(t *testing.T, patch func(*admissionv1.AdmissionReview) []byte) (string, []byte) {
	t.Helper()
	ca, err := certs.NewAuthority("name-it-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServing([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		if p := patch(&review); p != nil {
			review.Response.Patch = p
			review.Response.PatchType = ptr.To(admissionv1.PatchTypeJSONPatch)
		}
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
	})}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("name-setting webhook: %v", err)
		}
	}()
	t.Cleanup(func() { _ = srv.Close() })
	return "https://" + ln.Addr().(*net.TCPAddr).String() + "/", ca.CertPEM
}
