package certs

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestServingHosts(t *testing.T) {
	got := ServingHosts("driverset-webhook", "driverset-system", "127.0.0.1", "driverset-webhook")
	want := []string{"driverset-webhook", "driverset-webhook.driverset-system", "driverset-webhook.driverset-system.svc",
		"driverset-webhook.driverset-system.svc.cluster.local", "127.0.0.1"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestRenewal(t *testing.T) {
	hosts := ServingHosts("svc", "ns", "127.0.0.1")
	ca := mustCA(t, "ca", t0, 1000*time.Hour)
	other := mustCA(t, "other", t0, 1000*time.Hour)
	short := mustCA(t, "short", t0, 50*time.Hour)
	leaf := func(a *Authority, hosts []string, validity time.Duration) *x509.Certificate {
		certPEM, _, err := a.issueServing(hosts, t0, earliest(t0.Add(validity), a.Cert.NotAfter))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(certPEM)
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	good := leaf(ca, hosts, 90*time.Hour) // renewal due at t0+60h with RenewBefore 30h
	capped := leaf(short, hosts, 90*time.Hour)

	for _, tc := range []struct {
		name       string
		leaf       *x509.Certificate
		ca         *Authority
		at         time.Time
		wantReason string
		wantSwitch bool
	}{
		{"a young certificate is kept", good, ca, t0.Add(time.Hour), "", false},
		{"none is issued", nil, ca, t0, "no certificate", false},
		{"one nearing its end is renewed", good, ca, t0.Add(60 * time.Hour), "expires soon", false},
		{"an expired one is renewed", good, ca, t0.Add(90 * time.Hour), "expired", false},
		{"one from the future (clock skew) is replaced", good, ca, t0.Add(-time.Hour), "not valid yet", false},
		{"a new CA re-issues, once the webhooks trust it", good, other, t0.Add(time.Hour), "issued by another CA", true},
		{"new Service names re-issue", leaf(ca, hosts[:4], 90*time.Hour), ca, t0.Add(time.Hour), "hosts changed", false},
		{"one as long-lived as its CA cannot be bettered", capped, short, t0.Add(45 * time.Hour), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, sw := renewal(tc.leaf, tc.ca.Cert, hosts, tc.at, 30*time.Hour)
			if reason != tc.wantReason || sw != tc.wantSwitch {
				t.Errorf("renewal = %q, %v; want %q, %v", reason, sw, tc.wantReason, tc.wantSwitch)
			}
		})
	}
}

func TestReadServingIgnoresUnusablePairs(t *testing.T) {
	ca := mustCA(t, "ca", t0, time.Hour)
	certPEM, keyPEM, err := ca.IssueServing([]string{"svc"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := ca.IssueServing([]string{"svc"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if leaf, err := readServing(dir); leaf != nil || err != nil {
		t.Fatalf("empty dir: %v, %v", leaf, err)
	}
	if err := WriteKeyPair(dir, certPEM, otherKey); err != nil {
		t.Fatal(err)
	}
	if leaf, err := readServing(dir); leaf != nil || err != nil {
		t.Fatalf("mismatched pair read as %v, %v; want none", leaf, err)
	}
	if err := WriteKeyPair(dir, certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	if leaf, err := readServing(dir); leaf == nil || err != nil || leaf.DNSNames[0] != "svc" {
		t.Fatalf("good pair read as %v, %v", leaf, err)
	}
	if err := os.WriteFile(filepath.Join(dir, CertFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if leaf, err := readServing(dir); leaf != nil || err != nil {
		t.Fatalf("garbage read as %v, %v; want none", leaf, err)
	}
}
