package main

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/driverset/driverset/webhook"
)

// Every server serve runs waits for no request body it does not read (webhook.Bodiless), and the
// admission handlers read theirs within --admission-io-timeout (webhook.Limiter): issue 35. The
// probe and pprof servers are serve's own, not the manager's, whose muxes take no wrapper.

// webhookOptions is the webhook server: TLS 1.2 or later over HTTP/1.1, the callers' client
// certificates asked for, and a mux whose unknown paths read no body.
func webhookOptions(f serveFlags, callers webhook.Callers) crwebhook.Options {
	mux := http.NewServeMux()
	mux.Handle("/", webhook.Bodiless(http.NotFoundHandler()))
	return crwebhook.Options{
		Host:       f.webhookHost,
		Port:       f.webhookPort,
		CertDir:    f.certDir,
		WebhookMux: mux,
		TLSOpts: []func(*tls.Config){
			func(c *tls.Config) { c.MinVersion = tls.VersionTLS12 },
			// HTTP/2 off: its rapid-reset and stream-flood weaknesses are not worth it for
			// an apiserver client that speaks HTTP/1.1 just as well.
			func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} },
			callers.TLS,
		},
	}
}

// admissionEntry is one admission handler as served: only to the callers allowed, within the
// limit shared by every entry.
func admissionEntry(callers webhook.Callers, limit *webhook.Limiter, h http.Handler) http.Handler {
	return callers.Wrap(limit.Wrap(h))
}

// metricsOptions serve /metrics over HTTPS, to callers that the apiserver authenticates and
// authorizes (controller-runtime's filter: a TokenReview and a SubjectAccessReview for GET on
// the non-resource URL /metrics, cached), with controller-runtime's self-signed certificate; or,
// with --metrics-secure=false, over plain HTTP to anyone. No path reads a body: the filter
// (webhook.Bodiless outermost) wraps every handler, and one at / answers the unknown paths.
func metricsOptions(f serveFlags) metricsserver.Options {
	o := metricsserver.Options{
		BindAddress:   f.metricsAddr,
		SecureServing: f.metricsSecure,
		ExtraHandlers: map[string]http.Handler{"/": http.NotFoundHandler()},
	}
	var auth func(*rest.Config, *http.Client) (metricsserver.Filter, error)
	if f.metricsSecure {
		auth = filters.WithAuthenticationAndAuthorization
		// As the webhook server: HTTP/2 off (its rapid-reset and stream-flood weaknesses).
		o.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	}
	o.FilterProvider = bodilessFilter(auth)
	return o
}

// bodilessFilter is the metrics server's filter: auth's (none when nil) inside webhook.Bodiless.
func bodilessFilter(auth func(*rest.Config, *http.Client) (metricsserver.Filter, error)) func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
	return func(c *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
		var inner metricsserver.Filter
		if auth != nil {
			var err error
			if inner, err = auth(c, hc); err != nil {
				return nil, err
			}
		}
		return func(log logr.Logger, h http.Handler) (http.Handler, error) {
			if inner != nil {
				var err error
				if h, err = inner(log, h); err != nil {
					return nil, err
				}
			}
			return webhook.Bodiless(h), nil
		}, nil
	}
}

// probes are the liveness (/healthz) and readiness (/readyz) checks, served as the manager
// would: /healthz/<name> runs one check.
type probes struct {
	healthz, readyz map[string]healthz.Checker
}

func newProbes() *probes {
	return &probes{healthz: map[string]healthz.Checker{}, readyz: map[string]healthz.Checker{}}
}

// handler serves the checks added so far; add none after.
func (p *probes) handler() http.Handler {
	mux := http.NewServeMux()
	for path, checks := range map[string]map[string]healthz.Checker{"/healthz": p.healthz, "/readyz": p.readyz} {
		h := http.StripPrefix(path, &healthz.Handler{Checks: checks})
		mux.Handle(path, h)
		mux.Handle(path+"/", h)
	}
	return webhook.Bodiless(mux)
}

// pprofHandler serves Go's profiles as the manager would.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return webhook.Bodiless(mux)
}

// plainServer is an HTTP server of serve's own, listening on addr, unless addr is "" or "0"
// (nil then). Its timeouts are controller-runtime's for its own servers; the handler is to read
// no body (webhook.Bodiless).
func plainServer(name, addr string, h http.Handler) (*manager.Server, error) {
	if addr == "" || addr == "0" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &manager.Server{Name: name, Listener: ln, Server: &http.Server{
		Handler:           h,
		MaxHeaderBytes:    1 << 20,
		IdleTimeout:       90 * time.Second,
		ReadHeaderTimeout: 32 * time.Second,
	}}, nil
}
