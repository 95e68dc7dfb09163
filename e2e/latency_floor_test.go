//go:build testbed

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/driverset/driverset/certs"
)

// noopLabel marks the pods that the benchmark's no-op webhook is called for, and only those.
const noopLabel = "bench.driverset.dev/noop"

// noopWebhook serves, from this process, a mutating webhook that decodes each AdmissionReview and
// allows it unchanged, registered for pods labelled noopLabel as driverset's drivers webhook is
// for opted-in drivers: a URL on 127.0.0.1, TLS with an ECDSA certificate, HTTP/1.1, Fail, 5 s.
// What it adds to a create is what any webhook costs on this test bed (the apiserver encoding
// the review, the TLS round trip, decoding the answer), the floor under driverset's share. It
// returns once the apiserver calls it; the configuration and the server are removed at cleanup.
func noopWebhook(ctx context.Context, b *testing.B, c kubernetes.Interface, ns string) {
	b.Helper()
	ca, err := certs.NewAuthority("bench-noop-ca", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServing([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{pair}, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		b.Fatal(err)
	}
	var calls atomic.Int64
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		calls.Add(1)
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
	})}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.Errorf("no-op webhook: %v", err)
		}
	}()
	b.Cleanup(func() { _ = srv.Close() })

	url := "https://" + ln.Addr().(*net.TCPAddr).String() + "/"
	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-noop." + ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "noop.bench.driverset.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca.CertPEM},
			Rules:                   []admissionregistrationv1.RuleWithOperations{podCreates()},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{noopLabel: "true"}},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          ptr.To[int32](5),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	hooks := c.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := hooks.Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = hooks.Delete(context.Background(), cfg.Name, metav1.DeleteOptions{}) })

	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "noop-probe-", Labels: map[string]string{noopLabel: "true"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "probe"}}},
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		before := calls.Load()
		_, err := c.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && calls.Load() > before, nil
	})
	if err != nil {
		b.Fatalf("the apiserver did not call the no-op webhook: %v", err)
	}
}

func podCreates() admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
			Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}
}
