//go:build testbed

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/testbed"
	"github.com/driverset/driverset/webhook"
)

// Issue 11, exposure: with --webhook-client-ca driverset answers only callers that present the
// apiserver's webhook client certificate (the test bed's apiserver presents one, through its
// --admission-control-config-file). A direct call without it, or with a cluster user's
// certificate, is refused before the request is read; the apiserver's calls work as before.
func TestOnlyTheAPIServerCallsTheWebhook(t *testing.T) {
	ctx := context.Background()
	guarded := replaceSharedDriverset(t, "webhook-client-ca", "--webhook-client-ca="+bed.cluster.WebhookClientCAFile(), "--webhook-client-names="+testbed.WebhookClientName)

	// Through the apiserver: the driver, incarnation and executor webhooks all answer. The
	// executor is made without the label S-0's driver gives it, as an S-0 of an earlier version
	// makes them, so that it reaches the executor webhook.
	ns := namespace(t, nil)
	r := startApp(t, app(ns, "via-apiserver"), 0)
	old, err := r.driver.ExecutorPod(1)
	if err != nil {
		t.Fatal(err)
	}
	delete(old.Labels, contract.LabelDriver)
	exec, err := kube().CoreV1().Pods(ns).Create(ctx, old, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if exec.Labels[contract.LabelDriver] != r.names.StatefulSet {
		t.Errorf("the executor webhook did not patch executor %s: labels %v", exec.Name, exec.Labels)
	}

	review := driverReview(t, ns, "direct")
	apiserverCert, apiserverKey := bed.cluster.WebhookClientCertPEM()
	admin := bed.cluster.Config
	for _, tc := range []struct {
		name         string
		certPEM, key []byte
		status       int
		bodyHas      string
	}{
		{"no client certificate", nil, nil, http.StatusForbidden, "only the kube-apiserver may call this webhook"},
		{"a cluster admin's certificate", admin.CertData, admin.KeyData, http.StatusForbidden, "only the kube-apiserver may call this webhook"},
		{"the apiserver's certificate", apiserverCert, apiserverKey, http.StatusOK, `"allowed":true`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := callWebhook(t, guarded.Port, webhook.DriverPath, tc.certPEM, tc.key, review)
			if status != tc.status || !strings.Contains(body, tc.bodyHas) {
				t.Fatalf("answered %d %q, want %d with %q", status, body, tc.status, tc.bodyHas)
			}
			t.Logf("%d %s", status, strings.TrimSpace(body)[:min(120, len(strings.TrimSpace(body)))])
		})
	}
}

// Issue 35: a namespaced install (--watch-namespaces) answers, to whoever reaches it, only reviews
// about its own namespaces; a crafted review about another is refused before anything is read for
// it, where it used to be answered from what driverset could read there.
func TestANamespacedReplicaAnswersOnlyForItsNamespaces(t *testing.T) {
	ns := namespace(t, nil)
	replica := replaceSharedDriverset(t, "watch-namespaces", "--watch-namespaces="+ns)
	for _, tc := range []struct {
		path, namespace string
		bodyHas         []string
	}{
		{webhook.DriverPath, ns, []string{`"allowed":true`, "converted to a driverset placeholder"}},
		{webhook.DriverPath, "default", []string{`"allowed":false`, "driverset serves only namespaces " + ns + ` (--watch-namespaces), not \"default\"`}},
		// The executors entry fails open: it lets the review through unchanged, still reading nothing.
		{webhook.ExecutorPath, "default", []string{`"allowed":true`, `not \"default\": left as it is`}},
	} {
		t.Run(tc.path+" "+tc.namespace, func(t *testing.T) {
			status, body := callWebhook(t, replica.Port, tc.path, nil, nil, driverReview(t, tc.namespace, "crafted"))
			for _, want := range tc.bodyHas {
				if status != http.StatusOK || !strings.Contains(body, want) {
					t.Fatalf("answered %d %q, want 200 with %q", status, body, want)
				}
			}
		})
	}
}

// Issue 35: a cluster-wide install (the shared replica: every namespace watched) does not answer
// reviews about the namespaces its webhooks skip either, kube-system and its own: the apiserver
// never sends one, so one is a caller's own, refused before anything is read for it. Before, the
// shared replica converted and sealed a crafted kube-system driver pod.
func TestAClusterWideReplicaAnswersNothingAboutTheNamespacesItSkips(t *testing.T) {
	ns := namespace(t, nil)
	for _, tc := range []struct {
		path, namespace string
		bodyHas         []string
	}{
		{webhook.DriverPath, ns, []string{`"allowed":true`, "converted to a driverset placeholder"}},
		{webhook.DriverPath, "kube-system", []string{`"allowed":false`, `driverset does not serve namespace \"kube-system\"`, webhook.ReasonNotServed}},
		{webhook.DriverPath, "driverset-system", []string{`"allowed":false`, `driverset does not serve namespace \"driverset-system\"`}},
		{webhook.IncarnationPath, "kube-system", []string{`"allowed":false`, `driverset does not serve namespace \"kube-system\"`}},
		// The executors entry fails open: it lets the review through unchanged, still reading nothing.
		{webhook.ExecutorPath, "kube-system", []string{`"allowed":true`, `driverset does not serve namespace \"kube-system\"`, "left as it is"}},
	} {
		t.Run(tc.path+" "+tc.namespace, func(t *testing.T) {
			status, body := callWebhook(t, bed.driverset.Port, tc.path, nil, nil, driverReview(t, tc.namespace, "crafted"))
			for _, want := range tc.bodyHas {
				if status != http.StatusOK || !strings.Contains(body, want) {
					t.Fatalf("answered %d %q, want 200 with %q", status, body, want)
				}
			}
		})
	}
}

// driverReview is an AdmissionReview of spark-submit's create of app name's driver pod in
// namespace ns, as the apiserver would send it to the driver webhook.
func driverReview(t *testing.T, ns, name string) []byte {
	t.Helper()
	plan, err := app(ns, name).Plan()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(plan.DriverPod)
	if err != nil {
		t.Fatal(err)
	}
	review, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "direct-call", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: ns, Name: plan.DriverPodName, Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw},
			// The apiserver names the requesting user in every review (a seal is that user's).
			UserInfo: authenticationv1.UserInfo{Username: "alice"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return review
}

// callWebhook posts review to the webhook entry at path and port as a client with the given
// certificate (none when nil), trusting the shared driverset's CA.
func callWebhook(t *testing.T, port int, path string, certPEM, keyPEM, review []byte) (int, string) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(bed.driverset.CA.CertPEM)
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if certPEM != nil {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	resp, err := c.Post("https://127.0.0.1:"+strconv.Itoa(port)+path, "application/json", bytes.NewReader(review))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}
