package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ServingCurrent is a readiness check (healthz.Checker): ready means the webhook server at addr
// (e.g. "127.0.0.1:9443") presents the very certificate in CertDir, and that certificate
// verifies, for the Service's name, against the bundle this replica last read. A server that has
// not reloaded a renewed file yet is not ready; the probe's failureThreshold absorbs the reload's
// few seconds.
func (m *Manager) ServingCurrent(addr string) func(*http.Request) error {
	serverName := m.hosts[2] // <svc>.<ns>.svc, the name the apiserver uses
	return func(req *http.Request) error {
		st := m.remembered()
		if st == nil {
			return errors.New("no CA read yet")
		}
		want, err := readServing(m.o.CertDir)
		if err != nil {
			return err
		}
		if want == nil {
			return fmt.Errorf("no serving certificate in %s", m.o.CertDir)
		}
		ctx := context.Background()
		if req != nil {
			ctx = req.Context()
		}
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		// Verification is done below, against the bundle rather than the system roots.
		d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, ServerName: serverName}} //nolint:gosec
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("webhook server at %s: %w", addr, err)
		}
		defer conn.Close()
		peer := conn.(*tls.Conn).ConnectionState().PeerCertificates
		if len(peer) == 0 {
			return fmt.Errorf("webhook server at %s presents no certificate", addr)
		}
		if !peer[0].Equal(want) {
			return fmt.Errorf("webhook server at %s presents %s (serial %x), not the one in %s (serial %x)",
				addr, peer[0].Subject.CommonName, peer[0].SerialNumber, m.o.CertDir, want.SerialNumber)
		}
		if _, err := peer[0].Verify(x509.VerifyOptions{
			Roots:       st.bundle().Pool(),
			DNSName:     serverName,
			CurrentTime: m.o.Now(),
		}); err != nil {
			return fmt.Errorf("webhook certificate does not verify against the current bundle: %w", err)
		}
		return nil
	}
}
