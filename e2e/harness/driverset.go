package harness

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/driverset/driverset/certs"
)

// Build compiles cmd/driverset into dir and returns the binary's path.
func Build(ctx context.Context, dir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "driverset")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/driverset")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/driverset: %w\n%s", err, out)
	}
	return bin, nil
}

// Options for one `driverset serve` process.
type Options struct {
	Binary     string
	Kubeconfig string
	// Dir holds the serving certificate and the log.
	Dir string
	// CA signs the serving certificate; a new one when nil. Replicas share one.
	CA *certs.Authority
	// Port of the webhook; a free one when 0. Replicas each have their own.
	Port int
	// Args are added to serve's flags (e.g. --restart-backoff=1s).
	Args []string
	// ServiceAccount, as namespace/name, is who driverset acts as (by impersonation), so that
	// the manifests' RBAC is what it runs with and a missing permission fails a test. Empty: admin.
	ServiceAccount string
	// Metrics serves /metrics on a free port (Driverset.MetricsURL).
	Metrics bool
	// Pprof serves Go's /debug/pprof on a free port of 127.0.0.1 (Driverset.PprofURL).
	Pprof bool
	// SelfManagedTLS runs serve with --self-managed-tls: driverset makes its own CA (the Secret
	// driverset-ca), issues its serving certificate into its cert dir and injects the caBundle
	// itself. The harness then writes no certificate, CA is ignored (Driverset.CA is nil), and
	// Start trusts whatever is served: /readyz already means "serving the current certificate".
	SelfManagedTLS bool
	// Restart starts the process again, with the same flags, port and log, whenever it exits on
	// its own after it was once ready: what the kubelet does for the installed Deployment
	// (restartPolicy Always). controller-runtime exits when its leader lease runs out, which an
	// apiserver restart on 2 busy cores can cause; without this, every scenario after that one
	// would fail on a webhook that is not there. Stop and Kill end it for good.
	Restart bool
	// Env is added to the process's environment (NAME=value), e.g. the Go runtime settings the
	// Deployment gives driverset (DeploymentEnv).
	Env []string
	// SealKeyFile is the placeholder sealing key's file (serve's --seal-key-file): what the kubelet
	// brings from the Secret volume in a cluster. Empty: one file per cluster, beside Kubeconfig,
	// made with a random key by the first replica started (sealKeyFile), so replicas share it.
	SealKeyFile string
	// Alive is the cluster's liveness check (the test bed's CheckAlive): driverset cannot become
	// ready without the apiserver, so Start fails at once, naming the component, when one is down
	// for good. nil: no check.
	Alive Liveness
}

// Driverset is a running `driverset serve`.
type Driverset struct {
	Port       int
	MetricsURL string
	// PprofURL is where /debug/pprof is served (Options.Pprof), or "".
	PprofURL string
	// ProbeURL is the health probe server's root: /healthz and /readyz under it.
	ProbeURL string
	// Kubeconfig is the one driverset runs with (impersonating its ServiceAccount when asked).
	Kubeconfig string
	CA         *certs.Authority
	LogPath    string
	certDir    string
	binary     string
	args       []string
	env        []string
	// done is closed once the process has ended for good (not to be restarted).
	done chan struct{}

	mu       sync.Mutex
	cmd      *exec.Cmd // the current process
	ready    bool      // was ready once: an exit after this is restarted (Options.Restart)
	stopping bool      // Stop or Kill was called: an exit is not restarted
	restarts int
}

// Start starts `driverset serve` on 127.0.0.1 and waits until it is ready (serving its certificate).
func Start(ctx context.Context, o Options) (*Driverset, error) {
	var err error
	if o.SelfManagedTLS {
		o.CA = nil
	} else if o.CA == nil {
		if o.CA, err = certs.NewAuthority("driverset-e2e-ca", 24*time.Hour); err != nil {
			return nil, err
		}
	}
	if o.Port == 0 {
		if o.Port, err = freePort(); err != nil {
			return nil, err
		}
	}
	probePort, err := freePort()
	if err != nil {
		return nil, err
	}
	d := &Driverset{Port: o.Port, CA: o.CA, ProbeURL: "http://127.0.0.1:" + strconv.Itoa(probePort), certDir: filepath.Join(o.Dir, "certs-"+strconv.Itoa(o.Port)), done: make(chan struct{})}
	if !o.SelfManagedTLS {
		if err := d.Rotate(); err != nil {
			return nil, err
		}
	}
	kubeconfig := o.Kubeconfig
	if o.ServiceAccount != "" {
		kubeconfig = filepath.Join(o.Dir, "driverset-"+strconv.Itoa(o.Port)+".kubeconfig")
		if err := impersonating(o.Kubeconfig, kubeconfig, o.ServiceAccount); err != nil {
			return nil, err
		}
	}
	metricsAddr, err := optionalAddr(o.Metrics)
	if err != nil {
		return nil, err
	}
	if o.Metrics {
		// HTTPS with authentication and authorization, as installed (see Scrape).
		d.MetricsURL = "https://" + metricsAddr + "/metrics"
	}
	pprofAddr, err := optionalAddr(o.Pprof)
	if err != nil {
		return nil, err
	}
	if o.Pprof {
		d.PprofURL = "http://" + pprofAddr + "/debug/pprof"
	}
	d.Kubeconfig = kubeconfig
	d.LogPath = filepath.Join(o.Dir, "driverset-"+strconv.Itoa(o.Port)+".log")
	// Appended to, not truncated: a replica restarted on its port (after a crash) keeps its
	// predecessor's log, which is read for panics at the end of the run.
	logf, err := os.OpenFile(d.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	keyFile, err := sealKeyFile(o)
	if err != nil {
		logf.Close()
		return nil, err
	}
	args := append([]string{"serve",
		"--kubeconfig=" + kubeconfig,
		"--seal-key-file=" + keyFile,
		"--webhook-host=127.0.0.1",
		"--webhook-port=" + strconv.Itoa(o.Port),
		"--cert-dir=" + d.certDir,
		"--metrics-bind-address=" + metricsAddr,
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probePort),
		"--pprof-bind-address=" + pprofAddr,
		"--leader-election-namespace=driverset-system",
		"--image=driverset/driverset:e2e",
	}, o.Args...)
	if o.SelfManagedTLS {
		args = append(args, "--self-managed-tls")
	}
	d.binary, d.args, d.env = o.Binary, args, o.Env
	cmd, err := d.launch(logf)
	if err != nil {
		logf.Close()
		return nil, err
	}
	d.cmd = cmd
	go d.supervise(o.Restart, logf)
	ready := d.ProbeURL + "/readyz"
	err = o.Alive.poll(ctx, 100*time.Millisecond, 60*time.Second, func(ctx context.Context) (bool, error) {
		select {
		case <-d.done:
			return false, fmt.Errorf("driverset exited early; log: %s", d.LogPath)
		default:
		}
		resp, err := http.Get(ready)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		d.Kill()
		return nil, fmt.Errorf("driverset not ready: %w (log: %s)", err, d.LogPath)
	}
	d.mu.Lock()
	d.ready = true
	d.mu.Unlock()
	return d, d.checkServing()
}

// launch starts one driverset process, its output appended to logf.
func (d *Driverset) launch(logf *os.File) (*exec.Cmd, error) {
	cmd := exec.Command(d.binary, d.args...)
	cmd.Env = append(os.Environ(), d.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The process dies with the test binary, even when that is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd, cmd.Start()
}

// supervise waits for the process and, when restart is set and it exited on its own after it
// was once ready, starts it again a second later, as a kubelet would; it closes d.done once the
// process has ended for good.
func (d *Driverset) supervise(restart bool, logf *os.File) {
	defer close(d.done)
	defer logf.Close()
	for {
		d.mu.Lock()
		cmd := d.cmd
		d.mu.Unlock()
		err := cmd.Wait()
		d.mu.Lock()
		again := restart && d.ready && !d.stopping
		d.mu.Unlock()
		if !again {
			return
		}
		fmt.Fprintf(logf, "%s (%v); starting it again in 1s, as its kubelet would\n", restartMark, err)
		time.Sleep(time.Second)
		d.mu.Lock()
		if d.stopping {
			d.mu.Unlock()
			return
		}
		next, err := d.launch(logf)
		if err != nil {
			d.mu.Unlock()
			fmt.Fprintf(logf, "harness: driverset could not be started again: %v\n", err)
			return
		}
		d.cmd = next
		d.restarts++
		d.mu.Unlock()
	}
}

// Restarts is how many times the process was started again after it exited on its own.
func (d *Driverset) Restarts() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.restarts
}

// process is the current process, nil when none was started.
func (d *Driverset) process() *os.Process {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return nil
	}
	return d.cmd.Process
}

// stop marks d as stopping (no restart follows) and returns the current process.
func (d *Driverset) stop() *os.Process {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	d.stopping = true
	d.mu.Unlock()
	return d.process()
}

// Rotate issues a new serving certificate from the CA and writes it where driverset watches.
func (d *Driverset) Rotate() error {
	if d.CA == nil {
		return errors.New("driverset manages its own certificates (SelfManagedTLS)")
	}
	certPEM, keyPEM, err := d.CA.IssueServing([]string{"127.0.0.1", "localhost"}, 24*time.Hour)
	if err != nil {
		return err
	}
	return certs.WriteKeyPair(d.certDir, certPEM, keyPEM)
}

// checkServing makes a TLS handshake with the webhook port, trusting only the CA (anything,
// when driverset made its own: the scenario checks that chain itself).
func (d *Driverset) checkServing() error {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if d.CA == nil {
		cfg.InsecureSkipVerify = true //nolint:gosec // self-managed TLS: the CA is driverset's, checked by the scenario
	} else {
		cfg.RootCAs = x509.NewCertPool()
		cfg.RootCAs.AppendCertsFromPEM(d.CA.CertPEM)
	}
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", d.Port), cfg)
	if err != nil {
		return fmt.Errorf("webhook TLS handshake: %w", err)
	}
	return conn.Close()
}

// Stop sends SIGTERM and waits for a clean exit.
func (d *Driverset) Stop() error {
	p := d.stop()
	if p == nil {
		return nil
	}
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		return nil
	case <-time.After(15 * time.Second):
		d.Kill()
		return errors.New("driverset did not stop within 15s of SIGTERM; killed")
	}
}

// Kill stops the process at once, as a crash would, and for good.
func (d *Driverset) Kill() {
	p := d.stop()
	if p == nil {
		return
	}
	_ = p.Kill()
	<-d.done
}

// impersonating writes to dst the kubeconfig src acting as ServiceAccount sa ("ns/name").
func impersonating(src, dst, sa string) error {
	cfg, err := clientcmd.LoadFromFile(src)
	if err != nil {
		return err
	}
	ns, name, ok := strings.Cut(sa, "/")
	if !ok {
		return fmt.Errorf("ServiceAccount %q is not namespace/name", sa)
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = "system:serviceaccount:" + ns + ":" + name
		auth.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	}
	return clientcmd.WriteToFile(*cfg, dst)
}

// optionalAddr is a free address on 127.0.0.1 for a server serve runs when on, or "0" (serve's
// "off") when not.
func optionalAddr(on bool) (string, error) {
	if !on {
		return "0", nil
	}
	p, err := freePort()
	if err != nil {
		return "", err
	}
	return "127.0.0.1:" + strconv.Itoa(p), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
