package certs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fieldManager names driverset's certificate code in managedFields.
const fieldManager = "driverset-certs"

// readWebhooks is the webhook configuration, nil when it does not exist (nothing to inject, and
// nothing that a CA change could break).
func (m *Manager) readWebhooks(ctx context.Context) (*admissionv1.MutatingWebhookConfiguration, error) {
	cfg, err := m.o.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, m.o.WebhookConfigName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", m.o.WebhookConfigName, err)
	}
	return cfg, nil
}

// trustedByAll says whether every webhook's caBundle holds ca; vacuously true without a
// configuration or without a CA to check.
func trustedByAll(cfg *admissionv1.MutatingWebhookConfiguration, ca *Authority) bool {
	if cfg == nil || ca == nil {
		return true
	}
	for _, w := range cfg.Webhooks {
		b, err := ParseBundle(w.ClientConfig.CABundle)
		if err != nil || !b.Contains(ca.Cert) {
			return false
		}
	}
	return true
}

// bundleInAPI is every CA any webhook of cfg trusts now.
func bundleInAPI(cfg *admissionv1.MutatingWebhookConfiguration) Bundle {
	var all Bundle
	if cfg == nil {
		return nil
	}
	for _, w := range cfg.Webhooks {
		b, _ := ParseBundle(w.ClientConfig.CABundle) // an unreadable bundle trusts nothing worth keeping
		all = append(all, b...)
	}
	return mergeBundle(all...)
}

type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// injectPatch is the JSON patch that sets caBundle to want on every webhook that holds
// something else; nil when none does. Each change is guarded by a test of the webhook's name, so
// a patch computed from a configuration that was reordered meanwhile fails instead of writing
// into the wrong entry.
func injectPatch(cfg *admissionv1.MutatingWebhookConfiguration, want []byte) []patchOp {
	var ops []patchOp
	for i, w := range cfg.Webhooks {
		if bytes.Equal(w.ClientConfig.CABundle, want) {
			continue
		}
		ops = append(ops,
			patchOp{Op: "test", Path: fmt.Sprintf("/webhooks/%d/name", i), Value: w.Name},
			patchOp{Op: "add", Path: fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i), Value: want})
	}
	return ops
}

// inject makes every webhook of cfg trust exactly bundle. Idempotent: no write when they do.
func (m *Manager) inject(ctx context.Context, cfg *admissionv1.MutatingWebhookConfiguration, bundle Bundle) (patched int, err error) {
	if cfg == nil {
		return 0, nil
	}
	ops := injectPatch(cfg, bundle.PEM())
	if len(ops) == 0 {
		return 0, nil
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return 0, err
	}
	_, err = m.o.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().
		Patch(ctx, cfg.Name, types.JSONPatchType, data, metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil {
		return 0, fmt.Errorf("injecting caBundle into MutatingWebhookConfiguration %s: %w", cfg.Name, err)
	}
	return len(ops) / 2, nil
}
