package certs

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"time"
)

// Bundle is a set of trusted CA certificates: what a webhook's clientConfig.caBundle holds.
type Bundle []*x509.Certificate

// ParseBundle reads every CERTIFICATE block of a PEM text; other blocks are skipped.
func ParseBundle(pemText []byte) (Bundle, error) {
	var b Bundle
	for rest := pemText; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return b, nil
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("caBundle: %w", err)
		}
		b = append(b, c)
	}
}

// mergeBundle is the canonical bundle of certs: each certificate once, newest first (then by
// bytes). Canonical so that replicas that compute it from the same CAs write the very same bytes
// and never flip a webhook configuration back and forth.
func mergeBundle(certs ...*x509.Certificate) Bundle {
	var b Bundle
	for _, c := range certs {
		if c != nil && !b.Contains(c) {
			b = append(b, c)
		}
	}
	slices.SortFunc(b, func(x, y *x509.Certificate) int {
		if c := y.NotBefore.Compare(x.NotBefore); c != 0 {
			return c
		}
		return bytes.Compare(x.Raw, y.Raw)
	})
	return b
}

// Contains says whether c is in the bundle (byte for byte).
func (b Bundle) Contains(c *x509.Certificate) bool {
	return slices.ContainsFunc(b, func(x *x509.Certificate) bool { return x.Equal(c) })
}

// PEM is the bundle as a caBundle.
func (b Bundle) PEM() []byte {
	var out []byte
	for _, c := range b {
		out = append(out, pemBlock("CERTIFICATE", c.Raw)...)
	}
	return out
}

// Pool is the bundle as verification roots.
func (b Bundle) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range b {
		p.AddCert(c)
	}
	return p
}

// validAt keeps the certificates still valid at now: an expired CA is no use to anyone.
func (b Bundle) validAt(now time.Time) Bundle {
	return slices.DeleteFunc(slices.Clone(b), func(c *x509.Certificate) bool { return !now.Before(c.NotAfter) })
}
