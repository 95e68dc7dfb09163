package testbed

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// EnvBinDir names the environment variable that points at the test bed's binaries.
const EnvBinDir = "DRIVERSET_TESTBED_BIN"

// Component names: keys of LogPaths, and the log files' base names. A node's kwok is
// "kwok-<node>".
const (
	ComponentEtcd              = "etcd"
	ComponentAPIServer         = "kube-apiserver"
	ComponentControllerManager = "kube-controller-manager"
	ComponentScheduler         = "kube-scheduler"
	kwokPrefix                 = "kwok-"
)

// requiredBinaries are what the test bed runs; kubectl is built too but only humans use it.
func requiredBinaries() []string {
	return []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}
}

// startPhaseTimeout bounds each step of Start, so a broken component fails the test in
// minutes rather than at `go test`'s global timeout.
const startPhaseTimeout = 2 * time.Minute

//go:embed stages/*.yaml
var stageFiles embed.FS

// Options configure a test bed; zero values get sensible test defaults.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok.
	// Default: $DRIVERSET_TESTBED_BIN. Missing binaries are an error, never a skip.
	BinDir string
	// Nodes is how many KWOK nodes exist at start, named kwok-node-1..N. Default 2.
	// A negative value starts none.
	Nodes int
	// Dir holds certificates, etcd data, logs and kubeconfigs. Default: a new temporary folder.
	// Stop deletes it unless KeepLogs was called. It must not already hold a test bed.
	Dir string
	// NodeMonitorGracePeriod: how long a silent node stays Ready before it turns Unknown
	// (kube-controller-manager --node-monitor-grace-period). Default 10s.
	NodeMonitorGracePeriod time.Duration
	// PodEvictionTimeout: the default not-ready/unreachable tolerations the apiserver adds to
	// pods (--default-*-toleration-seconds), i.e. how long after Unknown a pod is evicted.
	// Rounded up to whole seconds. Default 10s.
	PodEvictionTimeout time.Duration
	// Log gets progress lines ("etcd ready in 1.2s"). Default io.Discard.
	Log io.Writer
	// RealNodes is how many real nodes start, named node-1..N: kubelet, containerd and
	// kube-proxy in namespaces of their own, running real containers (realnode.go). With real
	// nodes the apiserver listens on the nodes' network (10.77.0.1) instead of 127.0.0.1, and
	// CoreDNS serves cluster.local there. Default 0.
	RealNodes int
	// Images are OCI image archives imported into every real node's containerd (no registry is
	// reachable); PauseImage, the name of the pod sandbox image among them.
	Images     []string
	PauseImage string
	// AuditLog turns on the apiserver's audit log (audit.go): the calls of workloads' clients
	// at Metadata level, read from AuditLogPath. Default off.
	AuditLog bool
}

func (o Options) withDefaults() Options {
	if o.BinDir == "" {
		o.BinDir = os.Getenv(EnvBinDir)
	}
	if o.Nodes == 0 {
		o.Nodes = 2
	}
	if o.NodeMonitorGracePeriod == 0 {
		o.NodeMonitorGracePeriod = 10 * time.Second
	}
	if o.PodEvictionTimeout == 0 {
		o.PodEvictionTimeout = 10 * time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

// checkBinaries says exactly what is missing and how to get it.
func checkBinaries(binDir string) error {
	const hint = "run `make e2e` or set " + EnvBinDir + " (hack/testbed-build.sh prints it)"
	if binDir == "" {
		return errors.New("testbed: no binaries: " + hint)
	}
	var missing []string
	for _, b := range requiredBinaries() {
		st, err := os.Stat(filepath.Join(binDir, b))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("testbed: %s lacks %v: %s", binDir, missing, hint)
	}
	return nil
}

// Cluster is a running test bed.
type Cluster struct {
	Config         *rest.Config // admin (system:masters), to https://127.0.0.1:<port>
	Client         kubernetes.Interface
	KubeconfigPath string // admin kubeconfig file usable with kubectl
	Dir            string
	BinDir         string

	opts  Options
	lay   layout
	pki   *pki
	spawn *spawner
	// webhookClient is what the apiserver presents to admission webhooks.
	webhookClient *webhookClient

	mu    sync.Mutex
	procs map[string]*process // control plane, by component name
	// lifecycle serializes the restarts a test asks for (restart) with the supervisor's
	// (supervise), so a component never runs twice.
	lifecycle sync.Mutex
	exits     map[string][]time.Time // unasked exits, by component (supervise)
	restarts  map[string]int         // restarts after them, by component
	givenUp   map[string]bool        // components the supervisor left down (crash loop, failed start)
	logged    map[string]bool        // every component that ever ran, deleted nodes' kwoks included
	nodes     map[string]*kwokNode
	nextIndex int // the next node's index: its /24 and node IP
	net       hostNet
	netLock   *os.File // held while net exists (lockRealNet)
	real      map[string]*realNode
	nextReal  int // the next real node's index
	keep      bool
	stopped   bool
	stopErr   error
}

// kwokNode is one fake node and the kwok process that is its kubelet.
type kwokNode struct {
	name  string
	index int
	proc  *process // nil while the node is killed
}

// Start brings up the control plane and Options.Nodes nodes, and returns once the apiserver is
// healthy, the `default` ServiceAccount exists in `default`, and every node is Ready.
// On error nothing is left running and Dir is kept for its logs (the error names it).
func Start(ctx context.Context, o Options) (*Cluster, error) {
	o = o.withDefaults()
	if err := checkBinaries(o.BinDir); err != nil {
		return nil, err
	}
	dir := o.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "driverset-testbed-"); err != nil {
			return nil, err
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "etcd")); err == nil {
		return nil, fmt.Errorf("testbed: %s already holds a test bed (etcd/); remove it or choose another Dir", dir)
	}
	c := &Cluster{
		Dir:       dir,
		BinDir:    o.BinDir,
		opts:      o,
		procs:     map[string]*process{},
		exits:     map[string][]time.Time{},
		restarts:  map[string]int{},
		givenUp:   map[string]bool{},
		logged:    map[string]bool{},
		nodes:     map[string]*kwokNode{},
		nextIndex: 1,
		real:      map[string]*realNode{},
		nextReal:  1,
	}
	if o.RealNodes > 0 {
		if err := checkRealNodePrereqs(o.BinDir); err != nil {
			return nil, err
		}
		if o.PauseImage == "" || len(o.Images) == 0 {
			return nil, errors.New("testbed: real nodes need Images and a PauseImage among them")
		}
	}
	if err := c.start(ctx); err != nil {
		c.keep = true
		_ = c.Stop()
		return nil, fmt.Errorf("testbed: %w (logs in %s)", err, filepath.Join(dir, "logs"))
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	begin := time.Now()
	for _, d := range []string{"logs", "etcd", "kwok-home"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o700); err != nil {
			return err
		}
	}
	ports, err := freePorts(5)
	if err != nil {
		return err
	}
	_, svcNet, _ := net.ParseCIDR(serviceCIDR)
	kubernetesIP := net.IPv4(svcNet.IP[0], svcNet.IP[1], svcNet.IP[2], svcNet.IP[3]+1)
	apiHost := "127.0.0.1"
	if c.opts.RealNodes > 0 {
		if err := c.startNetwork(); err != nil {
			return err
		}
		apiHost = realHostIP
	}
	if c.pki, err = newPKI(kubernetesIP); err != nil {
		return err
	}
	if err := c.pki.write(filepath.Join(c.Dir, "pki")); err != nil {
		return err
	}
	if c.webhookClient, err = newWebhookClient(filepath.Join(c.Dir, "pki")); err != nil {
		return err
	}
	c.lay = layout{
		Dir:                    c.Dir,
		APIHost:                apiHost,
		EtcdClientPort:         ports[0],
		EtcdPeerPort:           ports[1],
		APIServerPort:          ports[2],
		ControllerManagerPort:  ports[3],
		SchedulerPort:          ports[4],
		NodeMonitorGracePeriod: c.opts.NodeMonitorGracePeriod,
		PodEvictionTimeout:     c.opts.PodEvictionTimeout,
		PKI:                    c.pki.files,
		AdminKC:                filepath.Join(c.Dir, "admin.kubeconfig"),
		ControllerManagerKC:    filepath.Join(c.Dir, "controller-manager.kubeconfig"),
		SchedulerKC:            filepath.Join(c.Dir, "scheduler.kubeconfig"),
		KwokConfig:             filepath.Join(c.Dir, "kwok-stages.yaml"),
		AdmissionConfig:        c.webhookClient.AdmissionConfig,
	}
	if c.opts.AuditLog {
		if c.lay.AuditPolicy, c.lay.AuditLog, err = writeAuditPolicy(c.Dir); err != nil {
			return err
		}
	}
	server := fmt.Sprintf("https://%s:%d", apiHost, c.lay.APIServerPort)
	for path, id := range map[string]*keyPair{
		c.lay.AdminKC:             c.pki.Admin,
		c.lay.ControllerManagerKC: c.pki.ControllerManager,
		c.lay.SchedulerKC:         c.pki.Scheduler,
	} {
		if err := writeKubeconfig(path, server, c.pki.CA.CertPEM, id); err != nil {
			return err
		}
	}
	c.KubeconfigPath = c.lay.AdminKC
	if err := writeStages(c.lay.KwokConfig); err != nil {
		return err
	}
	c.Config = restConfig(server, c.pki.CA.CertPEM, c.pki.Admin)
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return err
	}
	c.spawn = newSpawner()

	step := time.Now()
	if err := c.serve(ctx, ComponentEtcd); err != nil {
		return err
	}
	c.logf("etcd ready in %.1fs", time.Since(step).Seconds())

	step = time.Now()
	if err := c.serve(ctx, ComponentAPIServer); err != nil {
		return err
	}
	c.logf("kube-apiserver ready in %.1fs (%s)", time.Since(step).Seconds(), server)

	for _, name := range []string{ComponentControllerManager, ComponentScheduler} {
		if err := c.serve(ctx, name); err != nil {
			return err
		}
	}

	step = time.Now()
	var names []string
	for i := 1; i <= c.opts.Nodes; i++ {
		name := fmt.Sprintf("kwok-node-%d", i)
		if err := c.createNode(ctx, name); err != nil {
			return err
		}
		names = append(names, name)
	}
	for _, name := range names {
		if err := c.waitNodeReady(ctx, name, ""); err != nil {
			return err
		}
	}
	if len(names) > 0 {
		c.logf("%d nodes Ready in %.1fs", len(names), time.Since(step).Seconds())
	}
	if c.opts.RealNodes > 0 {
		step = time.Now()
		if err := c.startCoreDNS(); err != nil {
			return err
		}
		for i := 1; i <= c.opts.RealNodes; i++ {
			if err := c.AddRealNode(ctx, fmt.Sprintf("%s%d", RealNodePrefix, i)); err != nil {
				return err
			}
		}
		c.logf("%d real nodes Ready in %.1fs", c.opts.RealNodes, time.Since(step).Seconds())
	}
	if err := c.waitFor(ctx, "ServiceAccount default/default", c.defaultServiceAccountExists); err != nil {
		return err
	}
	c.logf("test bed ready in %.1fs; export KUBECONFIG=%s", time.Since(begin).Seconds(), c.KubeconfigPath)
	return nil
}

// startComponent runs one control-plane binary with its log in Dir/logs, under a supervisor
// when it is one a real cluster restarts (restartsOnExit).
func (c *Cluster) startComponent(name, bin string, args []string) error {
	p, err := c.spawn.startProcess(name, filepath.Join(c.BinDir, bin), args, c.logPath(name), nil)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.stopped {
		// Stop ran meanwhile (a supervisor's restart): it did not see p, so p goes here.
		c.mu.Unlock()
		p.stop()
		return fmt.Errorf("testbed: stopped")
	}
	c.procs[name] = p
	delete(c.givenUp, name)
	c.logged[name] = true
	c.mu.Unlock()
	if restartsOnExit(name) {
		go c.supervise(name, p)
	}
	return nil
}

func (c *Cluster) logPath(component string) string {
	return filepath.Join(c.Dir, "logs", component+".log")
}

func (c *Cluster) logf(format string, args ...any) {
	// One Write per line, straight from here, so a testing.TB writer reports this file's line.
	_, _ = fmt.Fprintf(c.opts.Log, "testbed: "+format+"\n", args...)
}

// writeStages concatenates our kwok stage files into the one config file kwok reads.
func writeStages(path string) error {
	entries, err := stageFiles.ReadDir("stages")
	if err != nil {
		return err
	}
	var out []byte
	for _, e := range entries {
		b, err := stageFiles.ReadFile("stages/" + e.Name())
		if err != nil {
			return err
		}
		out = append(out, "---\n"...)
		out = append(out, b...)
		out = append(out, '\n')
	}
	return os.WriteFile(path, out, 0o644)
}

// freePorts asks the kernel for n distinct free loopback ports. All listeners are held until
// every port is known, so the n ports differ; another process could still take one before the
// component binds it, which the component's log would then say.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// KeepLogs makes Stop leave Dir (logs, certificates, etcd data) in place.
func (c *Cluster) KeepLogs() {
	c.mu.Lock()
	c.keep = true
	c.mu.Unlock()
}

// LogPaths maps each component that ran ("etcd", "kube-apiserver", "kube-controller-manager",
// "kube-scheduler", "kwok-<node>", deleted nodes included) to its log file. A revived node's
// kwok appends to the same file, after a "====" line.
func (c *Cluster) LogPaths() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]string{}
	for name := range c.logged {
		m[name] = c.logPath(name)
	}
	return m
}

// Nodes lists the nodes the test bed made that still exist (killed ones included), sorted.
func (c *Cluster) Nodes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := make([]string, 0, len(c.nodes))
	for n := range c.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// PIDs returns the process id of every component still running, by component name; tests use
// it to prove that nothing outlives Stop.
func (c *Cluster) PIDs() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]int{}
	for name, p := range c.procs {
		if !p.exited() {
			m[name] = p.pid()
		}
	}
	for name, n := range c.nodes {
		if n.proc != nil && !n.proc.exited() {
			m[kwokPrefix+name] = n.proc.pid()
		}
	}
	return m
}

// CACertPEM is the cluster CA (it signed the apiserver's serving certificate).
func (c *Cluster) CACertPEM() []byte { return c.pki.CA.CertPEM }
