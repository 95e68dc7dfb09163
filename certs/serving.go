package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"time"
)

// File names in CertDir: controller-runtime's webhook server defaults.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// ServingHosts are the names the apiserver may use for the webhook Service, plus extra hosts
// (e.g. 127.0.0.1 where the webhook is registered by URL).
func ServingHosts(service, namespace string, extra ...string) []string {
	hosts := []string{
		service,
		service + "." + namespace,
		service + "." + namespace + ".svc",
		service + "." + namespace + ".svc.cluster.local",
	}
	for _, h := range extra {
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// readServing is the leaf of the pair in dir; nil when there is none or the pair does not load
// (a half-written or foreign pair is replaced, never served).
func readServing(dir string) (*x509.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, nil //nolint:nilerr // an unusable pair is the same as none: issue a new one
	}
	return x509.ParseCertificate(pair.Certificate[0])
}

// renewal says why the serving certificate leaf must be replaced at now by one from ca, or ""
// when it is fine. switchCA is true when the only reason is that the CA changed: that
// replacement waits until the webhooks trust the new CA.
func renewal(leaf, ca *x509.Certificate, hosts []string, now time.Time, renewBefore time.Duration) (reason string, switchCA bool) {
	switch {
	case leaf == nil:
		return "no certificate", false
	case !now.Before(leaf.NotAfter):
		return "expired", false
	case now.Before(leaf.NotBefore):
		return "not valid yet", false
	case !bytes.Equal(leaf.RawIssuer, ca.RawSubject) || leaf.CheckSignatureFrom(ca) != nil:
		return "issued by another CA", true
	case !sameHosts(leaf, hosts):
		return "hosts changed", false
	// A certificate already as long-lived as its CA cannot be bettered: renewing it would only
	// loop. The CA's own rotation ends that.
	case !now.Before(leaf.NotAfter.Add(-renewBefore)) && leaf.NotAfter.Before(ca.NotAfter):
		return "expires soon", false
	}
	return "", false
}

func sameHosts(leaf *x509.Certificate, hosts []string) bool {
	have := slices.Clone(leaf.DNSNames)
	for _, ip := range leaf.IPAddresses {
		have = append(have, ip.String())
	}
	want := slices.Clone(hosts)
	slices.Sort(have)
	slices.Sort(want)
	return slices.Equal(have, want)
}
