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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/driverset/driverset/certs"
	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
	"github.com/driverset/driverset/e2e/sparksim"
)

// ownedLaterLabel selects the pods the later webhook of TestOwnerAddedAfterDriversetIsRefused
// gives an owner.
const ownedLaterLabel = "e2e.driverset.dev/owned-later"

// A mutating webhook called after driverset's makes a spark-submit driver another object's, as the
// Kubeflow Spark operator's webhook does up to v2.3 with its SparkApplication: the apiserver calls
// driverset again (reinvocationPolicy IfNeeded) and driverset, under the namespace policy, refuses
// its own placeholder with its reason rather than leave a gated pod Pending forever. The operator's
// own driver, known by its label at driverset's first call, is left alone and keeps the owner.
func TestOwnerAddedAfterDriversetIsRefused(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, map[string]string{contract.LabelPolicy: contract.PolicyEnforce})
	// The owner: a ConfigMap, so that the garbage collector finds it; driverset's rule is any
	// owner that is not a Pod, whatever its kind.
	owner, err := kube().CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	laterWebhook(t, ns, metav1.OwnerReference{
		APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	})

	t.Run("a spark-submit driver owned after conversion is refused", func(t *testing.T) {
		a := app(ns, "owned-later")
		a.DriverLabels = map[string]string{ownedLaterLabel: "true"}
		res, err := sparksim.Submit(ctx, kube(), a, sparksim.SubmitOptions{})
		if res == nil || res.Plan == nil {
			t.Fatalf("spark-submit: no plan (%v)", err)
		}
		if err == nil || res.ExitCode != 1 {
			var gates []corev1.PodSchedulingGate
			if res != nil && res.Pod != nil {
				gates = res.Pod.Spec.SchedulingGates
			}
			t.Fatalf("spark-submit: exit %d, error %v, driver pod gates %v; want the create refused by driverset", res.ExitCode, err, gates)
		}
		for _, want := range []string{
			`admission webhook "drivers-enforced.driverset.dev" denied the request`,
			`driverset cannot take over driver pod ` + ns + "/" + res.Plan.DriverPodName,
			`controlled by ConfigMap "app-owner" (v1), not by a pod`,
			"after driverset had made it a placeholder",
		} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal %q does not say %q", err.Error(), want)
			}
		}
		t.Logf("spark-submit was refused: %v", err)
		if _, err := kube().CoreV1().Pods(ns).Get(ctx, res.Plan.DriverPodName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("driver pod %s: %v, want it never created", res.Plan.DriverPodName, err)
		}
	})

	t.Run("the Kubeflow operator's driver runs as it is, owned", func(t *testing.T) {
		a := app(ns, "kubeflow-pi")
		a.DriverLabels = map[string]string{ownedLaterLabel: "true", convert.LabelKubeflowLaunched: "true"}
		res, err := sparksim.Submit(ctx, kube(), a, sparksim.SubmitOptions{})
		if err != nil {
			t.Fatalf("spark-submit: %v, want the operator's driver created", err)
		}
		p := res.Pod
		if convert.IsPlaceholder(p) || len(p.Spec.SchedulingGates) != 0 || !metav1.IsControlledBy(p, owner) {
			t.Fatalf("driver pod: placeholder %v, gates %v, owners %v; want it as its creator and the later webhook made it",
				convert.IsPlaceholder(p), p.Spec.SchedulingGates, p.OwnerReferences)
		}
		waitFor(t, 30*time.Second, "the operator's driver pod scheduled", func(ctx context.Context) (bool, error) {
			got, err := kube().CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
			return err == nil && got.Spec.NodeName != "", nil
		})
		if _, err := kube().AppsV1().StatefulSets(ns).Get(ctx, contract.NamesFor(p.Name).StatefulSet, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("StatefulSet for %s: %v, want none", p.Name, err)
		}
	})
}

// laterWebhook serves, from this process, a mutating webhook that adds owner as the only
// ownerReference of every pod created in ns with ownedLaterLabel. Its configuration's name sorts
// after driverset's, so the apiserver calls it after driverset's entries; like the Kubeflow
// operator's, it is not re-invoked itself. It returns once the apiserver applies its patch; the
// configuration and the server are removed at cleanup.
func laterWebhook(t *testing.T, ns string, owner metav1.OwnerReference) {
	t.Helper()
	patch, err := json.Marshal([]map[string]any{{"op": "add", "path": "/metadata/ownerReferences", "value": []metav1.OwnerReference{owner}}})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	url, ca := serveWebhook(t, func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		calls.Add(1)
		return &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true, Patch: patch, PatchType: ptr.To(admissionv1.PatchTypeJSONPatch)}
	})
	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	never := admissionregistrationv1.NeverReinvocationPolicy
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		// "zz-…" sorts after "driverset": the apiserver calls configurations in the order of their names.
		ObjectMeta: metav1.ObjectMeta{Name: "zz-owner-later." + ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "owner-later.e2e.driverset.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
			Rules:                   []admissionregistrationv1.RuleWithOperations{podCreates()},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{ownedLaterLabel: "true"}},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			ReinvocationPolicy:      &never,
			TimeoutSeconds:          ptr.To[int32](5),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	hooks := kube().AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := hooks.Create(context.Background(), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hooks.Delete(context.Background(), cfg.Name, metav1.DeleteOptions{}) })

	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "owner-later-probe-", Labels: map[string]string{ownedLaterLabel: "true"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "probe"}}},
	}
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, bed.cluster.Alive(func(ctx context.Context) (bool, error) {
		before := calls.Load()
		got, err := kube().CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && calls.Load() > before && len(got.OwnerReferences) == 1, nil
	}))
	if err != nil {
		t.Fatalf("the apiserver did not call the later webhook (or did not apply its patch): %v", err)
	}
}

// serveWebhook serves answer as an admission webhook over TLS on 127.0.0.1 until the test ends,
// and returns its URL and the CA bundle to register it with.
func serveWebhook(t *testing.T, answer func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) (string, []byte) {
	t.Helper()
	ca, err := certs.NewAuthority("e2e-webhook-ca", time.Hour)
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
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		review.Response = answer(review.Request)
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
	})}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("webhook server: %v", err)
		}
	}()
	t.Cleanup(func() { _ = srv.Close() })
	return "https://" + ln.Addr().(*net.TCPAddr).String() + "/", ca.CertPEM
}
