package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Expiry is a prometheus.Collector of driverset_certificate_expiry_seconds: the seconds left
// until the NotAfter of the certificate that the webhook server at Addr presents, read by a TLS
// handshake at each scrape, so it is what the apiserver is actually served (a renewed file that
// the server has not reloaded does not count); and, when CA is set (self-managed TLS), of the
// CA that signs the serving certificates now.
type Expiry struct {
	// Addr is the webhook server's address, e.g. "127.0.0.1:9443".
	Addr string
	// CA returns the active CA's certificate, nil while none is known; nil: no CA series.
	CA  func() *x509.Certificate
	Now func() time.Time

	desc *prometheus.Desc
}

// NewExpiry makes the collector for the webhook server at addr.
func NewExpiry(addr string, ca func() *x509.Certificate) *Expiry {
	return &Expiry{Addr: addr, CA: ca, Now: time.Now,
		desc: prometheus.NewDesc("driverset_certificate_expiry_seconds",
			"Seconds until the certificate expires: certificate=serving is the one the webhook server presents, certificate=ca the CA that signs it (self-managed TLS only).",
			[]string{"certificate"}, nil)}
}

// handshakeTimeout bounds the handshake of one scrape: the server is on this host.
const handshakeTimeout = 3 * time.Second

// Describe implements prometheus.Collector.
func (e *Expiry) Describe(ch chan<- *prometheus.Desc) { ch <- e.desc }

// Collect implements prometheus.Collector. A series that cannot be read is left out, not made
// invalid: controller-runtime fails the whole scrape on an invalid metric.
func (e *Expiry) Collect(ch chan<- prometheus.Metric) {
	now := e.Now()
	if c := e.served(); c != nil {
		ch <- prometheus.MustNewConstMetric(e.desc, prometheus.GaugeValue, secondsLeft(c, now), "serving")
	}
	if e.CA == nil {
		return
	}
	if c := e.CA(); c != nil {
		ch <- prometheus.MustNewConstMetric(e.desc, prometheus.GaugeValue, secondsLeft(c, now), "ca")
	}
}

// served is the leaf certificate the server at Addr presents, nil when none can be read.
func (e *Expiry) served() *x509.Certificate {
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	// Only the certificate is read, not trusted: nothing is sent over this connection.
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec
	conn, err := d.DialContext(ctx, "tcp", e.Addr)
	if err != nil {
		return nil
	}
	defer conn.Close()
	peer := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(peer) == 0 {
		return nil
	}
	return peer[0]
}

// secondsLeft is the time from now to c's NotAfter, negative once it has expired.
func secondsLeft(c *x509.Certificate, now time.Time) float64 {
	return c.NotAfter.Sub(now).Seconds()
}

// ActiveCA is the certificate of the CA that signs serving certificates now, nil before the
// CA Secret was first read.
func (m *Manager) ActiveCA() *x509.Certificate {
	st := m.remembered()
	if st == nil || st.active == nil {
		return nil
	}
	return st.active.Cert
}
