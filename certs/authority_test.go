package certs

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestIssuedCertificateVerifiesAgainstItsAuthority(t *testing.T) {
	ca, err := NewAuthority("driverset-test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServing([]string{"127.0.0.1", "driverset-webhook.driverset-system.svc"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteKeyPair(dir, certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatalf("written pair does not load: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca.CertPEM) {
		t.Fatal("CA PEM does not parse")
	}
	for _, host := range []string{"127.0.0.1", "driverset-webhook.driverset-system.svc"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host}); err != nil {
			t.Errorf("certificate does not verify for %s: %v", host, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "other.example"}); err == nil {
		t.Error("certificate verifies for a host it was not issued for")
	}
	if info, err := os.Stat(filepath.Join(dir, "tls.key")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("tls.key mode = %v, %v; want 0600", info.Mode().Perm(), err)
	}
}

func TestIssueServingNeedsAHost(t *testing.T) {
	ca, err := NewAuthority("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ca.IssueServing(nil, time.Hour); err == nil {
		t.Fatal("want an error for no hosts")
	}
}
