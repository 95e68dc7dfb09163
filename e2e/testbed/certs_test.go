package testbed

import (
	"crypto/x509"
	"net"
	"path/filepath"
	"testing"

	"k8s.io/client-go/util/keyutil"
)

func TestPKI(t *testing.T) {
	svcIP := net.ParseIP("10.96.0.1")
	p, err := newPKI(svcIP)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(p.CA.Cert)
	frontRoots := x509.NewCertPool()
	frontRoots.AddCert(p.FrontProxyCA.Cert)

	t.Run("apiserver serves 127.0.0.1, localhost and the kubernetes Service", func(t *testing.T) {
		for _, name := range []string{"127.0.0.1", "localhost", "kubernetes.default.svc", "10.96.0.1"} {
			_, err := p.APIServer.Cert.Verify(x509.VerifyOptions{
				DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		if _, err := p.APIServer.Cert.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: roots}); err == nil {
			t.Error("serving certificate is valid for example.com")
		}
	})

	clients := []struct {
		name   string
		kp     *keyPair
		roots  *x509.CertPool
		cn     string
		groups []string
	}{
		{"admin", p.Admin, roots, userAdmin, []string{"system:masters"}},
		{"controller-manager", p.ControllerManager, roots, "system:kube-controller-manager", nil},
		{"scheduler", p.Scheduler, roots, "system:kube-scheduler", nil},
		{"front-proxy", p.FrontProxyClient, frontRoots, "front-proxy-client", nil},
	}
	for _, c := range clients {
		t.Run("client "+c.name, func(t *testing.T) {
			if _, err := c.kp.Cert.Verify(x509.VerifyOptions{Roots: c.roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Fatal(err)
			}
			if got := c.kp.Cert.Subject.CommonName; got != c.cn {
				t.Errorf("CN %q, want %q", got, c.cn)
			}
			if got := c.kp.Cert.Subject.Organization; len(got) != len(c.groups) || (len(got) > 0 && got[0] != c.groups[0]) {
				t.Errorf("groups %v, want %v", got, c.groups)
			}
		})
	}

	t.Run("front-proxy client is not trusted as a normal client", func(t *testing.T) {
		if _, err := p.FrontProxyClient.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
			t.Error("front-proxy client certificate verifies against the cluster CA")
		}
	})

	t.Run("files parse the way the components parse them", func(t *testing.T) {
		dir := t.TempDir()
		if err := p.write(filepath.Join(dir, "pki")); err != nil {
			t.Fatal(err)
		}
		if _, err := keyutil.PrivateKeyFromFile(p.files.SAKey); err != nil {
			t.Errorf("service-account signing key: %v", err)
		}
		if keys, err := keyutil.PublicKeysFromFile(p.files.SAPub); err != nil || len(keys) != 1 {
			t.Errorf("service-account public key: %v (%d keys)", err, len(keys))
		}
		for _, f := range []string{p.files.APIServerKey, p.files.CAKey, p.files.FrontProxyClient} {
			if _, err := keyutil.PrivateKeyFromFile(f); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	})
}
