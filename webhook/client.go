package webhook

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"slices"
)

// Callers lets, when it has a CA, only the kube-apiserver call the admission handlers: a request
// must come with a client certificate that the CA verifies and, when Names is set, whose common
// name is one of them. Anyone else on the pod network is refused before the request is read, so a
// direct call can neither bypass the apiserver's flow control nor learn what the handlers know
// (executor names, pod existence, LimitRange minimums). The apiserver presents that certificate
// when an admin configures it (see docs/install.md#only-the-apiserver-calls-the-webhook).
type Callers struct {
	CA    *x509.CertPool
	Names []string
}

// LoadCallers reads the PEM bundle at caFile; names may be empty (any certificate of that CA).
func LoadCallers(caFile string, names []string) (Callers, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return Callers{}, fmt.Errorf("webhook client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return Callers{}, fmt.Errorf("webhook client CA %s holds no PEM certificate", caFile)
	}
	return Callers{CA: pool, Names: names}, nil
}

// TLS asks each client for its certificate and verifies one that is given against the CA. A
// client without one still completes the handshake (the readiness probes dial the server without
// a certificate), and its requests are refused by Wrap.
func (c Callers) TLS(cfg *tls.Config) {
	if c.CA == nil {
		return
	}
	cfg.ClientAuth = tls.VerifyClientCertIfGiven
	cfg.ClientCAs = c.CA
}

// Wrap serves next only to a caller that refused says nothing against; any other is answered
// before its body is read, and its connection closed.
func (c Callers) Wrap(next http.Handler) http.Handler {
	if c.CA == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reason := c.refused(r.TLS); reason != "" {
			refuse(w, http.StatusForbidden, "driverset: "+reason)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refused says why the connection st may not call the handlers, or "" when it may. Only a chain
// the TLS layer verified against the CA counts (VerifiedChains): a certificate merely presented
// proves nothing.
func (c Callers) refused(st *tls.ConnectionState) string {
	if st == nil || len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return "only the kube-apiserver may call this webhook: no verified client certificate"
	}
	cn := st.VerifiedChains[0][0].Subject.CommonName
	if len(c.Names) > 0 && !slices.Contains(c.Names, cn) {
		return fmt.Sprintf("only the kube-apiserver may call this webhook: client certificate %q is not one of %v", cn, c.Names)
	}
	return ""
}
