package testbed

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The real nodes' network. Everything lives in network namespaces the test bed makes itself,
// plus one veth end and a few routes in the host namespace that vanish with that veth:
//
//	host netns:   <prefix>h 10.77.0.1/24  (kube-apiserver, CoreDNS and the tests dial from here)
//	              routes 10.78.<i>.0/24 via 10.77.0.<10+i>
//	   │ veth
//	<prefix>-sw:  bridge br0 (a switch: no addresses, no routing, no firewall)
//	   │ veth, one per node
//	<prefix>-n<i>: eth0 10.77.0.<10+i>/24, forwarding on, routes to the other nodes' pod /24s;
//	              kubelet, containerd, kube-proxy, and the CNI bridge cni0 10.78.<i>.1/24 for pods
//
// The host never forwards (its ip_forward stays as the VM's init set it): node-to-node and
// pod-to-pod traffic crosses the switch at layer 2, and each node routes for its own pods.
const (
	realNetPrefix = "10.77.0."
	realHostIP    = realNetPrefix + "1"
	realNetBits   = "/24"
	// realPodCIDRFormat is a real node's pod /24, apart from the KWOK nodes' fake 10.244.x.
	realPodCIDRFormat = "10.78.%d.0/24"
	realPodGWFormat   = "10.78.%d.1"
	// realClusterCIDR holds every real node's pod /24 (kube-proxy's clusterCIDR).
	realClusterCIDR = "10.78.0.0/16"
	maxRealNodes    = 40
	netnsDir        = "/run/netns"
	// namePrefix starts every netns and host interface the test bed makes; the rest is the
	// test process's PID, so leftovers of a killed run can be told apart and removed.
	namePrefix = "dstb"
)

func realNodeIP(index int) string { return realNetPrefix + strconv.Itoa(10+index) }

// hostNet is the set of namespaces and interfaces of one test bed's real nodes.
type hostNet struct {
	prefix string // dstb<pid>
}

func newHostNet() hostNet { return hostNet{prefix: namePrefix + strconv.Itoa(os.Getpid())} }

func (h hostNet) switchNS() string        { return h.prefix + "-sw" }
func (h hostNet) hostIf() string          { return h.prefix + "h" }
func (h hostNet) nodeNS(index int) string { return h.prefix + "-n" + strconv.Itoa(index) }
func (h hostNet) nodeNSPath(index int) string {
	return filepath.Join(netnsDir, h.nodeNS(index))
}

// switchPort is the switch side of node index's veth: setting it down cuts the node off.
func (h hostNet) switchPort(index int) string { return "n" + strconv.Itoa(index) }

// ip runs one `ip` command and says what failed.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// create makes the switch and the host's port on it.
func (h hostNet) create() error {
	if err := errors.Join(removeStaleNetworks(), removeStaleCgroups()); err != nil {
		return err
	}
	sw := h.switchNS()
	steps := [][]string{
		{"netns", "add", sw},
		{"-n", sw, "link", "set", "lo", "up"},
		{"-n", sw, "link", "add", "br0", "type", "bridge"},
		{"-n", sw, "link", "set", "br0", "up"},
		{"link", "add", h.hostIf(), "type", "veth", "peer", "name", "host", "netns", sw},
		{"-n", sw, "link", "set", "host", "master", "br0", "up"},
		{"addr", "add", realHostIP + realNetBits, "dev", h.hostIf()},
		{"link", "set", h.hostIf(), "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	return nil
}

// addNode makes node index's namespace, plugs it into the switch and routes its pod /24.
// others are the indexes of the real nodes that exist already.
func (h hostNet) addNode(index int, others []int) error {
	ns, sw, port := h.nodeNS(index), h.switchNS(), h.switchPort(index)
	steps := [][]string{
		{"netns", "add", ns},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"-n", sw, "link", "set", port, "master", "br0", "up"},
		{"-n", ns, "addr", "add", realNodeIP(index) + realNetBits, "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		// Anything else (Service IPs before kube-proxy rewrites them) leaves towards the host,
		// which answers for itself and drops the rest.
		{"-n", ns, "route", "add", "default", "via", realHostIP},
		{"route", "add", fmt.Sprintf(realPodCIDRFormat, index), "via", realNodeIP(index), "dev", h.hostIf()},
	}
	for _, o := range others {
		steps = append(steps,
			[]string{"-n", ns, "route", "add", fmt.Sprintf(realPodCIDRFormat, o), "via", realNodeIP(o)},
			[]string{"-n", h.nodeNS(o), "route", "add", fmt.Sprintf(realPodCIDRFormat, index), "via", realNodeIP(index)},
		)
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	// Forwarding between eth0 and the pods' bridge: this namespace's own setting, not the host's.
	return writeNSSysctl(h.nodeNSPath(index), "net/ipv4/ip_forward", "1")
}

// setLink brings node index's switch port up or down: down is a network partition that leaves
// every process on the node running.
func (h hostNet) setLink(index int, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return ip("-n", h.switchNS(), "link", "set", h.switchPort(index), state)
}

// remove deletes every namespace of this test bed; deleting the switch deletes the host's veth
// end and with it the routes through it.
func (h hostNet) remove() error {
	return removeNetworksOf(h.prefix)
}

// removeNetworksOf deletes the namespaces named prefix-* and the host interface prefix+"h".
func removeNetworksOf(prefix string) error {
	entries, err := os.ReadDir(netnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			if err := ip("netns", "del", e.Name()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", prefix+"h")); err == nil {
		errs = append(errs, ip("link", "del", prefix+"h"))
	}
	return errors.Join(errs...)
}

// removeStaleNetworks removes the networks earlier test beds left when their process was killed before
// it could clean up: namespaces named after a PID that no longer runs.
func removeStaleNetworks() error {
	entries, err := os.ReadDir(netnsDir)
	if err != nil {
		return nil //nolint:nilerr // no netns at all: nothing stale
	}
	seen := map[string]bool{}
	var errs []error
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), namePrefix)
		if !ok {
			continue
		}
		pid, _, _ := strings.Cut(rest, "-")
		n, err := strconv.Atoi(pid)
		if err != nil || seen[pid] || processAlive(n) {
			continue
		}
		seen[pid] = true
		errs = append(errs, removeNetworksOf(namePrefix+pid))
	}
	return errors.Join(errs...)
}

func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// writeNSSysctl sets a per-namespace sysctl inside the network namespace at nsPath.
func writeNSSysctl(nsPath, key, value string) error {
	out, err := exec.Command("nsenter", "--net="+nsPath, "--", "sh", "-c",
		fmt.Sprintf("echo %s > /proc/sys/%s", value, key)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("sysctl %s=%s in %s: %v: %s", key, value, nsPath, err, out)
	}
	return nil
}
