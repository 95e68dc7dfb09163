package certs

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// serveTLS serves the key pair in current on a local port until the test ends; storing another
// pair in current is a reload, as the cert watcher does.
func serveTLS(t *testing.T, current *atomic.Pointer[tls.Certificate]) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return current.Load(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake()
			}(c)
		}
	}()
	return l.Addr().String()
}

func keyPair(t *testing.T, ca *Authority, notAfter time.Time) *tls.Certificate {
	t.Helper()
	certPEM, keyPEM, err := ca.issueServing([]string{"127.0.0.1"}, t0, notAfter)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &kp
}

func TestExpiryIsWhatIsServed(t *testing.T) {
	ca := mustCA(t, "ca", t0, 1000*time.Hour)
	var current atomic.Pointer[tls.Certificate]
	current.Store(keyPair(t, ca, t0.Add(90*time.Hour)))
	addr := serveTLS(t, &current)

	var active atomic.Pointer[x509.Certificate]
	e := NewExpiry(addr, active.Load)
	e.Now = func() time.Time { return t0.Add(10 * time.Hour) }
	reg := prometheus.NewRegistry()
	reg.MustRegister(e)

	expect := func(want string) {
		t.Helper()
		head := "# HELP driverset_certificate_expiry_seconds Seconds until the certificate expires: certificate=serving is the one the webhook server presents, certificate=ca the CA that signs it (self-managed TLS only).\n# TYPE driverset_certificate_expiry_seconds gauge\n"
		if err := testutil.GatherAndCompare(reg, strings.NewReader(head+want)); err != nil {
			t.Error(err)
		}
	}
	// 90 h certificate, 10 h in: 80 h left. No CA known yet: no CA series.
	expect(`driverset_certificate_expiry_seconds{certificate="serving"} 288000` + "\n")

	// The server reloads a renewed certificate: the gauge follows what it presents.
	current.Store(keyPair(t, ca, t0.Add(200*time.Hour)))
	active.Store(ca.Cert)
	expect(`driverset_certificate_expiry_seconds{certificate="ca"} 3.564e+06` + "\n" +
		`driverset_certificate_expiry_seconds{certificate="serving"} 684000` + "\n")
}

func TestExpiryOfAServerThatIsDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if n := testutil.CollectAndCount(NewExpiry(addr, nil)); n != 0 {
		t.Errorf("%d series for a server that does not answer, want none (an invalid one would fail the whole scrape)", n)
	}
}

func TestSecondsLeftIsNegativeOnceExpired(t *testing.T) {
	c := &x509.Certificate{NotAfter: t0}
	if got := secondsLeft(c, t0.Add(time.Minute)); got != -60 {
		t.Errorf("secondsLeft = %v, want -60", got)
	}
}
