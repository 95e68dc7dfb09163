package webhook

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/driverset/driverset/certs"
)

// clientCert is a client certificate named cn, signed by ca.
func clientCert(t *testing.T, ca *certs.Authority, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestOnlyTheAPIServerCalls is the spec of Callers, over real TLS: with a client CA, a handler is
// reached only with a certificate that CA verifies (and, with Names, of one of those names).
func TestOnlyTheAPIServerCalls(t *testing.T) {
	serving, err := certs.NewAuthority("serving-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	clients, err := certs.NewAuthority("webhook-client-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := certs.NewAuthority("someone-else", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(caFile, clients.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	apiserver := clientCert(t, clients, "kube-apiserver-webhook-client")
	tests := []struct {
		name   string
		names  []string
		noCA   bool
		cert   *tls.Certificate
		status int
	}{
		{name: "off: anyone", noCA: true, status: http.StatusOK},
		{name: "no certificate", status: http.StatusForbidden},
		{name: "the apiserver's certificate", cert: &apiserver, status: http.StatusOK},
		{name: "the apiserver's certificate, its name required", names: []string{"kube-apiserver-webhook-client"}, cert: &apiserver, status: http.StatusOK},
		{name: "another name of the same CA", names: []string{"kube-apiserver-webhook-client"},
			cert: new(clientCert(t, clients, "system:node:worker-1")), status: http.StatusForbidden},
		// Go's client sends no certificate that the server's CAs did not sign; another client
		// that sends it anyway fails the handshake. Either way the handler is not reached.
		{name: "a certificate of another CA", cert: new(clientCert(t, other, "kube-apiserver-webhook-client")), status: http.StatusForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var callers Callers
			if !tc.noCA {
				if callers, err = LoadCallers(caFile, tc.names); err != nil {
					t.Fatal(err)
				}
			}
			srv := httptest.NewUnstartedServer(callers.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})))
			certPEM, keyPEM, err := serving.IssueServing([]string{"127.0.0.1"}, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
			callers.TLS(srv.TLS)
			srv.StartTLS()
			defer srv.Close()
			roots := x509.NewCertPool()
			roots.AppendCertsFromPEM(serving.CertPEM)
			cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
			if tc.cert != nil {
				cfg.Certificates = []tls.Certificate{*tc.cert}
			}
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
			resp, err := c.Post(srv.URL+DriverPath, "application/json", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("answered %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
}

func TestLoadCallersRefusesAFileWithoutCertificates(t *testing.T) {
	f := filepath.Join(t.TempDir(), "empty.crt")
	if err := os.WriteFile(f, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCallers(f, nil); err == nil {
		t.Fatal("a CA file without a certificate was accepted")
	}
}
