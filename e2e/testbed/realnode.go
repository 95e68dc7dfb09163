package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Real nodes: a kubelet, containerd and kube-proxy in network, mount and PID namespaces of their
// own (see netns.go for the network). They run real containers with Debian's runc, so they need
// root, and everything they use must already be on the machine: runc, iptables and conntrack
// (hack/node-packages.sh), the node binaries (hack/testbed-build.sh), and the images, which no
// registry serves here: Options.Images lists OCI archives imported into every node.

// RealNodePrefix names real nodes: node-1, node-2, …
const RealNodePrefix = "node-"

// DNSServiceIP is what the real nodes' kubelets give pods as their nameserver. It is the host's
// address on the nodes' network, where the test bed runs CoreDNS (a host process, so that
// killing a node never takes cluster DNS with it).
const DNSServiceIP = realHostIP

// realNodeBinaries are what real nodes need besides the control plane's.
func realNodeBinaries() []string {
	return []string{"kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr", "coredns", "cni/bridge", "cni/host-local"}
}

// realNodeTools are the Debian packages' commands real nodes need.
func realNodeTools() []string {
	return []string{"runc", "iptables", "ip", "nsenter", "unshare", "mount"}
}

type realNode struct {
	name  string
	index int
	files realNodeFiles
	proc  *process // nil while the node is killed
	cut   bool     // partitioned from the network
	// pidNS is the node's PID namespace as last seen alive (/proc/<pid>/ns/pid of its init), kept
	// after a kill so that tests can check nothing of the node survived.
	pidNS string
	// kubelet is what the node's kubelet runs with besides the defaults (RestartKubelet).
	kubelet KubeletSettings
	logind  *Logind // the node's private system bus, when a test started one (StartLogind)
}

// cgroupRootName is the node's own cgroup (cgroupfs), under which its kubelet puts every pod.
func (n *realNode) cgroupRootName(h hostNet) string { return "/" + h.prefix + "-" + n.name }

func checkRealNodePrereqs(binDir string) error {
	if os.Geteuid() != 0 {
		return errors.New("testbed: real nodes need root (network namespaces, mounts, cgroups)")
	}
	var missing []string
	for _, b := range realNodeBinaries() {
		if st, err := os.Stat(filepath.Join(binDir, b)); err != nil || st.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	for _, t := range realNodeTools() {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("testbed: real nodes need %v: run hack/node-packages.sh and hack/testbed-build.sh", missing)
	}
	return nil
}

// startNetwork makes the real nodes' network and runs CoreDNS on it.
func (c *Cluster) startNetwork() error {
	lock, err := lockRealNet(c.opts.Log)
	if err != nil {
		return err
	}
	c.netLock = lock
	c.net = newHostNet()
	if err := c.net.create(); err != nil {
		return err
	}
	return nil
}

// startCoreDNS serves cluster.local to the real nodes' pods from the host's address on their
// network, reading Services and EndpointSlices with the admin identity.
func (c *Cluster) startCoreDNS() error {
	dir := filepath.Join(c.Dir, "coredns")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	cf, err := renderTemplate("Corefile", corefile, map[string]string{"Bind": realHostIP, "Kubeconfig": c.KubeconfigPath})
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(path, cf, 0o600); err != nil {
		return err
	}
	return c.startComponent(ComponentCoreDNS, "coredns", []string{"-conf", path})
}

// ComponentCoreDNS is the cluster DNS of the real nodes.
const ComponentCoreDNS = "coredns"

// AddRealNode makes a real node and waits until it is Ready and schedulable.
func (c *Cluster) AddRealNode(ctx context.Context, name string) error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return errors.New("testbed: stopped")
	}
	if _, ok := c.real[name]; ok {
		c.mu.Unlock()
		return fmt.Errorf("testbed: node %s already exists", name)
	}
	if c.nextReal > maxRealNodes {
		c.mu.Unlock()
		return fmt.Errorf("testbed: at most %d real nodes", maxRealNodes)
	}
	n := &realNode{name: name, index: c.nextReal, files: realNodeLayout(filepath.Join(c.Dir, "nodes", name))}
	c.nextReal++
	var others []int
	for _, o := range c.real {
		others = append(others, o.index)
	}
	c.real[name] = n
	c.mu.Unlock()

	if err := c.net.addNode(n.index, others); err != nil {
		return err
	}
	if err := c.writeRealNodeFiles(n); err != nil {
		return err
	}
	if err := c.startRealNode(n); err != nil {
		return err
	}
	return c.waitRealNodeReady(ctx, n)
}

func (c *Cluster) writeRealNodeFiles(n *realNode) error {
	f := n.files
	for _, d := range []string{f.Dir, f.CNIConfDir, f.SysctlDir, filepath.Dir(f.ContainerdSock), f.KubeletRoot} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := makeCgroupRoot(n.cgroupRootName(c.net)); err != nil {
		return err
	}
	p, err := c.realNodeParams(n)
	if err != nil {
		return err
	}
	files := map[string]string{
		f.Script:         nodeScript,
		f.ContainerdTOML: containerdConfig,
		filepath.Join(f.CNIConfDir, "10-testbed.conflist"): cniConfig,
		f.KubeletConfig: kubeletConfig,
		f.ProxyConfig:   proxyConfig,
	}
	for path, text := range files {
		b, err := renderTemplate(filepath.Base(path), text, p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, b, 0o700); err != nil {
			return err
		}
	}
	for key, value := range kernelTunables {
		if err := os.WriteFile(filepath.Join(f.SysctlDir, strings.ReplaceAll(key, "/", ".")), []byte(value+"\n"), 0o644); err != nil {
			return err
		}
	}
	server := c.Config.Host
	kubelet, err := c.pki.CA.issue(certSpec{CommonName: "system:node:" + n.name, Organization: []string{"system:nodes"}})
	if err != nil {
		return err
	}
	proxy, err := c.pki.CA.issue(certSpec{CommonName: "system:kube-proxy"})
	if err != nil {
		return err
	}
	if err := writeKubeconfig(f.KubeletKC, server, c.pki.CA.CertPEM, kubelet); err != nil {
		return err
	}
	return writeKubeconfig(f.ProxyKC, server, c.pki.CA.CertPEM, proxy)
}

// realNodeParams fills the node's templates.
func (c *Cluster) realNodeParams(n *realNode) (realNodeParams, error) {
	f := n.files
	runc, err := exec.LookPath("runc")
	if err != nil {
		return realNodeParams{}, err
	}
	c.mu.Lock()
	kubelet := n.kubelet
	c.mu.Unlock()
	return realNodeParams{
		realNodeFiles: f,
		Name:          n.name,
		NodeIP:        realNodeIP(n.index),
		PodCIDR:       fmt.Sprintf(realPodCIDRFormat, n.index),
		PodGateway:    fmt.Sprintf(realPodGWFormat, n.index),
		ClusterCIDR:   realClusterCIDR,
		BinDir:        c.BinDir,
		CNIBinDir:     filepath.Join(c.BinDir, "cni"),
		Runc:          runc,
		CgroupRoot:    n.cgroupRootName(c.net),
		PauseImage:    c.opts.PauseImage,
		CACert:        c.lay.PKI.CACert,
		DNSIP:         DNSServiceIP,
		Images:        c.opts.Images,
		LogDir:        filepath.Join(c.Dir, "logs"),
		LeaseSeconds:  leaseSeconds(c.opts.NodeMonitorGracePeriod),
		StatusEvery:   max(time.Second, c.opts.NodeMonitorGracePeriod/8),
		Kubelet:       kubelet,
	}, nil
}

// startRealNode runs the node's script as PID 1 of new PID and mount namespaces inside the
// node's network namespace. --kill-child: when unshare dies (SIGKILL from KillNode, or the test
// process dying, which SIGKILLs unshare through Pdeathsig), the script dies, and with it every
// process of the node.
func (c *Cluster) startRealNode(n *realNode) error {
	args := []string{"--net=" + c.net.nodeNSPath(n.index), "--",
		"unshare", "--mount", "--propagation", "slave", "--pid", "--fork", "--kill-child", "--mount-proc",
		"--", "/bin/bash", n.files.Script}
	p, err := c.spawn.startProcess(n.name, "/usr/bin/nsenter", args, c.logPath(n.name), nil)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		go p.kill()
		return errors.New("testbed: stopped")
	}
	n.proc = p
	for _, comp := range []string{n.name, n.name + "-containerd", n.name + "-kubelet", n.name + "-kube-proxy"} {
		c.logged[comp] = true
	}
	return nil
}

func (c *Cluster) waitRealNodeReady(ctx context.Context, n *realNode) error {
	return c.waitFor(ctx, "real node "+n.name+" Ready", func(ctx context.Context) (bool, error) {
		c.mu.Lock()
		p := n.proc
		c.mu.Unlock()
		if p != nil && p.exited() {
			return false, fmt.Errorf("node %s exited (%v); end of its log:\n%s\nkubelet:\n%s", n.name, p.err,
				tail(c.logPath(n.name), 2000), tail(c.logPath(n.name+"-kubelet"), 3000))
		}
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not registered yet
		}
		return NodeSchedulable(node), nil
	})
}

func (c *Cluster) realNode(name string) (*realNode, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.real[name]
	return n, ok
}

// RealNodes lists the real nodes, sorted.
func (c *Cluster) RealNodes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for n := range c.real {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// IsRealNode reports whether name is a real node (kubelet and containers) rather than a KWOK one.
func (c *Cluster) IsRealNode(name string) bool {
	_, ok := c.realNode(name)
	return ok
}

// killRealNode SIGKILLs the node's process group: kubelet, containerd, kube-proxy and, through
// the PID namespace, every container on it, as when a machine loses power.
func (c *Cluster) killRealNode(n *realNode) error {
	c.mu.Lock()
	p := n.proc
	n.proc = nil
	c.mu.Unlock()
	if p == nil {
		return fmt.Errorf("testbed: node %s: %w", n.name, ErrNodeDead)
	}
	p.kill()
	return nil
}

// reviveRealNode boots the node again on the same disk: containerd keeps its images, the
// kubelet finds the pods still bound to the node and runs them again.
func (c *Cluster) reviveRealNode(ctx context.Context, n *realNode) error {
	c.mu.Lock()
	alive := n.proc != nil
	c.mu.Unlock()
	if alive {
		return fmt.Errorf("testbed: node %s: %w", n.name, ErrNodeAlive)
	}
	since := time.Now()
	if err := c.startRealNode(n); err != nil {
		return err
	}
	// The Node may still look Ready from before the kill: wait for the new kubelet's heartbeat.
	if err := c.waitFor(ctx, "node "+n.name+"'s new kubelet to renew its Lease", func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not yet
		}
		return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(since), nil
	}); err != nil {
		return err
	}
	return c.waitRealNodeReady(ctx, n)
}

// PartitionNode cuts a real node off the network: its kubelet can no longer reach the apiserver
// and nobody can reach its pods, but every process on it, the containers included, keeps
// running. HealNode plugs it back.
func (c *Cluster) PartitionNode(name string) error {
	return c.setNodeLink(name, false)
}

// HealNode ends a partition made by PartitionNode.
func (c *Cluster) HealNode(name string) error {
	return c.setNodeLink(name, true)
}

func (c *Cluster) setNodeLink(name string, up bool) error {
	n, ok := c.realNode(name)
	if !ok {
		return fmt.Errorf("testbed: %s is not a real node", name)
	}
	if err := c.net.setLink(n.index, up); err != nil {
		return err
	}
	c.mu.Lock()
	n.cut = !up
	c.mu.Unlock()
	return nil
}

// NodeProcesses lists the processes running on a real node (in its PID namespace, containers
// included), so that tests can see from the host what really runs there. For a killed node it
// lists what is left of it, which should be nothing.
func (c *Cluster) NodeProcesses(name string) ([]Proc, error) {
	n, ok := c.realNode(name)
	if !ok {
		return nil, fmt.Errorf("testbed: %s is not a real node", name)
	}
	c.mu.Lock()
	p, ns := n.proc, n.pidNS
	c.mu.Unlock()
	if p != nil {
		// unshare's children are the node's init: its pid_for_children is the node's PID ns.
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid_for_children", p.pid()))
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		n.pidNS, ns = link, link
		c.mu.Unlock()
	}
	if ns == "" {
		return nil, fmt.Errorf("testbed: node %s was never seen running", name)
	}
	return processesIn(ns)
}

// Proc is one process seen from the host.
type Proc struct {
	PID     int
	Cmdline []string
	State   string // from /proc/<pid>/stat: R, S, Z …
	// InnerPID is its PID in its own (innermost) PID namespace: 1 for a container's first process.
	InnerPID int
}

// processesIn lists the processes whose PID namespace is ns, or nested inside it: a container's
// processes live in a PID namespace of their own, a child of the node's.
func processesIn(ns string) ([]Proc, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []Proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if !inPIDNamespace(pid, ns) {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		out = append(out, Proc{PID: pid, Cmdline: strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00"),
			State: statState(string(stat)), InnerPID: innerPID(string(status))})
	}
	return out, nil
}

// inPIDNamespace: the process's NSpid line lists its PID in every namespace from the root down;
// it is inside ns when ns is its own namespace or an ancestor. Ancestry is read from the chain of
// parent processes, which never leaves a PID namespace upwards except through its init.
func inPIDNamespace(pid int, ns string) bool {
	for p := pid; p > 1; {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p))
		if err != nil {
			return false
		}
		if link == ns {
			return true
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			return false
		}
		p = statPPID(string(stat))
	}
	return false
}

// innerPID reads the last PID of the NSpid line of /proc/<pid>/status.
func innerPID(status string) int {
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.Atoi(f[len(f)-1])
				return n
			}
		}
	}
	return 0
}

// statState and statPPID read fields 3 and 4 of /proc/<pid>/stat (after the command in parens).
func statState(stat string) string {
	f := statFields(stat)
	if len(f) < 1 {
		return ""
	}
	return f[0]
}

func statPPID(stat string) int {
	f := statFields(stat)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

func statFields(stat string) []string {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(stat[i+1:])
}

// stopRealNodes kills every real node, then removes their cgroups and the network. It runs after
// the nodes' processes are gone; errors are collected, never stop the cleanup.
func (c *Cluster) stopRealNodes() error {
	c.mu.Lock()
	nodes := make([]*realNode, 0, len(c.real))
	for _, n := range c.real {
		nodes = append(nodes, n)
	}
	c.mu.Unlock()
	var errs []error
	for _, n := range nodes {
		c.mu.Lock()
		p, l := n.proc, n.logind
		n.proc, n.logind = nil, nil
		c.mu.Unlock()
		if p != nil {
			p.kill()
		}
		if l != nil {
			errs = append(errs, l.Close())
		}
	}
	for _, n := range nodes {
		// The kernel ends a dead PID namespace's processes asynchronously; a cgroup can be
		// removed once the last of them is gone.
		var err error
		for range 50 {
			if err = removeCgroupRoot(n.cgroupRootName(c.net)); err == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		errs = append(errs, err)
	}
	if c.net.prefix != "" {
		errs = append(errs, c.net.remove())
	}
	if c.netLock != nil {
		errs = append(errs, c.netLock.Close()) // releases the machine-wide lock
		c.netLock = nil
	}
	return errors.Join(errs...)
}
