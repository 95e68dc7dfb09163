//go:build testbed

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
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

// The benchmark's two floor webhooks, served from this process, are called for pods with these
// labels, and only those: noopLabel's allows each pod unchanged, labelLabel's adds one label.
const (
	noopLabel  = "bench.driverset.dev/noop"
	labelLabel = "bench.driverset.dev/label"
	// labelAdded is the label the one-label webhook adds.
	labelAdded = "bench.driverset.dev/labelled"
)

// floorWebhooks serves, from this process, two mutating webhooks registered as driverset's drivers
// webhook is (a URL on 127.0.0.1, TLS with an ECDSA certificate, HTTP/1.1, Fail, 5 s): one for
// pods labelled noopLabel that decodes each AdmissionReview and allows it unchanged, one for pods
// labelled labelLabel that answers with a patch adding one label. What the first adds to a create
// is what any webhook costs on this test bed (the apiserver encoding the review, the TLS round
// trip, decoding the answer); the second adds what the apiserver does after any webhook that
// changes the pod (applies the patch, decodes the pod again, runs its own mutating plugins once
// more): the floor under a mutating webhook, whatever its handler does. It returns once the
// apiserver calls both; the configuration and the server are removed at cleanup.
func floorWebhooks(ctx context.Context, b *testing.B, c kubernetes.Interface, ns string) {
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
	// The one-label webhook's whole answer, the same for every pod: each carries labelLabel, so
	// /metadata/labels exists.
	labelPatch, err := json.Marshal([]map[string]string{{
		"op": "add", "path": "/metadata/labels/" + strings.ReplaceAll(labelAdded, "/", "~1"), "value": "true",
	}})
	if err != nil {
		b.Fatal(err)
	}
	var calls [2]atomic.Int64 // by path: allow, label
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		if r.URL.Path == "/label" {
			calls[1].Add(1)
			review.Response.Patch = labelPatch
			review.Response.PatchType = ptr.To(admissionv1.PatchTypeJSONPatch)
		} else {
			calls[0].Add(1)
		}
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
	})}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.Errorf("floor webhooks: %v", err)
		}
	}()
	b.Cleanup(func() { _ = srv.Close() })

	base := "https://" + ln.Addr().(*net.TCPAddr).String()
	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	hook := func(name, path, label string) admissionregistrationv1.MutatingWebhook {
		url := base + path
		return admissionregistrationv1.MutatingWebhook{
			Name:                    name,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca.CertPEM},
			Rules:                   []admissionregistrationv1.RuleWithOperations{podCreates()},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{label: "true"}},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          ptr.To[int32](5),
			AdmissionReviewVersions: []string{"v1"},
		}
	}
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-floor." + ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			hook(noopWebhookName, "/allow", noopLabel),
			hook(labelWebhookName, "/label", labelLabel),
		},
	}
	hooks := c.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := hooks.Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = hooks.Delete(context.Background(), cfg.Name, metav1.DeleteOptions{}) })

	for i, label := range []string{noopLabel, labelLabel} {
		probe := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "floor-probe-", Labels: map[string]string{label: "true"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "probe"}}},
		}
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			before := calls[i].Load()
			got, err := c.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err == nil && calls[i].Load() > before && (label != labelLabel || got.Labels[labelAdded] == "true"), nil
		})
		if err != nil {
			b.Fatalf("the apiserver did not call the %s webhook (or did not apply its patch): %v", label, err)
		}
	}
}

// The floor webhooks' names, by which the apiserver's metrics time their calls.
const (
	noopWebhookName  = "noop.bench.driverset.dev"
	labelWebhookName = "label.bench.driverset.dev"
)

func podCreates() admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
			Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}
}
