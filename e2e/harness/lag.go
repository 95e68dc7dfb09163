package harness

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// LaggingAPIServer is a plain-HTTP proxy on 127.0.0.1 in front of the apiserver that passes every
// request through at once but hands on the bytes of each watch Lag after the apiserver sent them:
// a client behind it reads live (get, list, every write) what is current, and its informers' caches
// see each change Lag late, in order. That is an informer cache lagging its apiserver, as it does
// under load or after a slow network, stretched to seconds so that what a controller decides
// between its cache and a live read can be raced on purpose. The proxy authenticates to the
// apiserver as the given rest.Config; a client's impersonation headers pass through.
type LaggingAPIServer struct {
	// Kubeconfig names the proxy as its server, with a user of no credentials of its own (Options
	// adds the impersonation of a ServiceAccount to it).
	Kubeconfig string
	// Lag is how late each watch's bytes arrive.
	Lag time.Duration

	srv *http.Server
	l   net.Listener
}

// StartLaggingAPIServer starts the proxy for upstream, writing its kubeconfig into dir.
func StartLaggingAPIServer(upstream *rest.Config, lag time.Duration, dir string) (*LaggingAPIServer, error) {
	target, err := url.Parse(upstream.Host)
	if err != nil {
		return nil, err
	}
	transport, err := rest.TransportFor(upstream)
	if err != nil {
		return nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // a watch's events are written on as they come out of the lag
	rp.ModifyResponse = func(resp *http.Response) error {
		if q := resp.Request.URL.Query().Get("watch"); q == "true" || q == "1" {
			resp.Body = newLaggingBody(resp.Body, lag)
		}
		return nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &LaggingAPIServer{Lag: lag, l: l, srv: &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}}
	p.Kubeconfig = filepath.Join(dir, "lagging-apiserver.kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["lagging"] = &clientcmdapi.Cluster{Server: "http://" + l.Addr().String()}
	cfg.AuthInfos["lagging"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["lagging"] = &clientcmdapi.Context{Cluster: "lagging", AuthInfo: "lagging"}
	cfg.CurrentContext = "lagging"
	if err := clientcmd.WriteToFile(*cfg, p.Kubeconfig); err != nil {
		l.Close()
		return nil, err
	}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

// Close stops the proxy and cuts the watches through it.
func (p *LaggingAPIServer) Close() error {
	err := p.srv.Close()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// laggingBody reads its upstream as fast as it comes, stamping each piece, and hands each piece
// on no earlier than lag after its stamp.
type laggingBody struct {
	upstream io.ReadCloser
	lag      time.Duration
	pieces   chan piece
	pending  []byte
	err      error
	stop     chan struct{}
	once     sync.Once
}

type piece struct {
	at   time.Time
	data []byte
	err  error
}

func newLaggingBody(upstream io.ReadCloser, lag time.Duration) *laggingBody {
	b := &laggingBody{upstream: upstream, lag: lag, pieces: make(chan piece, 1024), stop: make(chan struct{})}
	go b.pump()
	return b
}

func (b *laggingBody) pump() {
	for {
		buf := make([]byte, 32<<10)
		n, err := b.upstream.Read(buf)
		p := piece{at: time.Now(), data: buf[:n], err: err}
		select {
		case b.pieces <- p:
		case <-b.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

func (b *laggingBody) Read(out []byte) (int, error) {
	for len(b.pending) == 0 {
		if b.err != nil {
			return 0, b.err // the upstream's end, after every byte before it
		}
		var p piece
		select {
		case p = <-b.pieces:
		case <-b.stop:
			return 0, io.ErrClosedPipe
		}
		if wait := time.Until(p.at.Add(b.lag)); wait > 0 {
			select {
			case <-time.After(wait):
			case <-b.stop:
				return 0, io.ErrClosedPipe
			}
		}
		b.pending, b.err = p.data, p.err
	}
	n := copy(out, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

func (b *laggingBody) Close() error {
	b.once.Do(func() { close(b.stop) })
	return b.upstream.Close()
}
