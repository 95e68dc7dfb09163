//go:build testbed

package e2e

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
	hookURL, caPEM := serveWebhook(t, func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		allowed := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
		var pod corev1.Pod
		if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
			return allowed
		}
		mu.Lock()
		seen = append(seen, pod.Name)
		mu.Unlock()
		if pod.Name != "" {
			return allowed
		}
		allowed.Patch, _ = json.Marshal([]map[string]string{{"op": "add", "path": "/metadata/name", "value": pod.GenerateName + "named-by-webhook"}})
		allowed.PatchType = ptr.To(admissionv1.PatchTypeJSONPatch)
		return allowed
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
