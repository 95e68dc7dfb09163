package certs

import (
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
)

func TestInjectPatch(t *testing.T) {
	a := mustCA(t, "a", t0, time.Hour)
	want := mergeBundle(a.Cert).PEM()
	cfg := &admissionv1.MutatingWebhookConfiguration{Webhooks: []admissionv1.MutatingWebhook{
		{Name: "first", ClientConfig: admissionv1.WebhookClientConfig{CABundle: want}},
		{Name: "second"},
		{Name: "third", ClientConfig: admissionv1.WebhookClientConfig{CABundle: []byte("old")}},
	}}
	ops := injectPatch(cfg, want)
	wantOps := []patchOp{
		{"test", "/webhooks/1/name", "second"}, {"add", "/webhooks/1/clientConfig/caBundle", want},
		{"test", "/webhooks/2/name", "third"}, {"add", "/webhooks/2/clientConfig/caBundle", want},
	}
	if len(ops) != len(wantOps) {
		t.Fatalf("ops = %+v", ops)
	}
	for i := range ops {
		if ops[i].Op != wantOps[i].Op || ops[i].Path != wantOps[i].Path {
			t.Errorf("op %d = %s %s, want %s %s", i, ops[i].Op, ops[i].Path, wantOps[i].Op, wantOps[i].Path)
		}
	}
	cfg.Webhooks[1].ClientConfig.CABundle, cfg.Webhooks[2].ClientConfig.CABundle = want, want
	if ops := injectPatch(cfg, want); len(ops) != 0 {
		t.Errorf("a configuration that trusts the bundle gets %+v", ops)
	}
}

func TestTrustedByAll(t *testing.T) {
	a := mustCA(t, "a", t0, time.Hour)
	b := mustCA(t, "b", t0, time.Hour)
	both := mergeBundle(a.Cert, b.Cert).PEM()
	cfg := func(bundles ...[]byte) *admissionv1.MutatingWebhookConfiguration {
		c := &admissionv1.MutatingWebhookConfiguration{}
		for _, bundle := range bundles {
			c.Webhooks = append(c.Webhooks, admissionv1.MutatingWebhook{ClientConfig: admissionv1.WebhookClientConfig{CABundle: bundle}})
		}
		return c
	}
	for _, tc := range []struct {
		name string
		cfg  *admissionv1.MutatingWebhookConfiguration
		want bool
	}{
		{"every webhook holds it", cfg(both, b.CertPEM), true},
		{"one webhook lacks it", cfg(both, a.CertPEM), false},
		{"one webhook has no bundle", cfg(both, nil), false},
		{"no configuration: nothing to break", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := trustedByAll(tc.cfg, b); got != tc.want {
				t.Errorf("trustedByAll = %v, want %v", got, tc.want)
			}
		})
	}
}
