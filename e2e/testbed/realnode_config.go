package testbed

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"text/template"
	"time"
)

// realNodeFiles are the paths of one real node's configuration and state, all under its folder.
type realNodeFiles struct {
	Dir             string // nodes/<name>
	Script          string // the node's init script, PID 1 of its PID namespace
	ContainerdTOML  string
	ContainerdSock  string
	ContainerdRoot  string
	ContainerdState string
	CNIConfDir      string
	KubeletConfig   string
	KubeletKC       string
	KubeletRoot     string
	ProxyConfig     string
	ProxyKC         string
	SysctlDir       string
	// BusSocket is where the kubelet looks for the system D-Bus (StartLogind's private bus).
	BusSocket string
	// KubeletRestart, when present as the kubelet exits, makes the node script start it again
	// (with its new configuration) instead of ending the node (RestartKubelet).
	KubeletRestart string
}

func realNodeLayout(dir string) realNodeFiles {
	j := func(p string) string { return filepath.Join(dir, p) }
	return realNodeFiles{
		Dir:             dir,
		Script:          j("node.sh"),
		ContainerdTOML:  j("containerd.toml"),
		ContainerdSock:  j("containerd/containerd.sock"),
		ContainerdRoot:  j("containerd/root"),
		ContainerdState: j("containerd/state"),
		CNIConfDir:      j("cni/net.d"),
		KubeletConfig:   j("kubelet.yaml"),
		KubeletKC:       j("kubelet.kubeconfig"),
		KubeletRoot:     j("kubelet"),
		ProxyConfig:     j("kube-proxy.yaml"),
		ProxyKC:         j("kube-proxy.kubeconfig"),
		SysctlDir:       j("sysctl"),
		BusSocket:       j("dbus/system_bus_socket"),
		KubeletRestart:  j("kubelet.restart"),
	}
}

// realNodeParams is what the templates below are filled with.
type realNodeParams struct {
	realNodeFiles
	Name        string
	NodeIP      string
	PodCIDR     string
	PodGateway  string
	ClusterCIDR string
	BinDir      string
	CNIBinDir   string
	Runc        string
	CgroupRoot  string
	PauseImage  string
	CACert      string
	DNSIP       string
	Images      []string
	LogDir      string
	// LeaseSeconds and StatusEvery keep the kubelet's heartbeat in step with the control plane's
	// node monitor grace period, as the KWOK nodes do.
	LeaseSeconds int
	StatusEvery  time.Duration
	// Kubelet is what a test changed in this node's kubelet (RestartKubelet).
	Kubelet KubeletSettings
}

// kernelTunables are the sysctls the kubelet insists on (kubelet cm setupKernelTunables): the
// node script bind-mounts files holding these values over them inside the node's mount
// namespace, so the kubelet finds them set and never writes the VM's own settings.
var kernelTunables = map[string]string{ //nolint:gochecknoglobals // a constant table
	"vm/overcommit_memory":           "1",
	"vm/panic_on_oom":                "0",
	"kernel/panic":                   "10",
	"kernel/panic_on_oops":           "1",
	"kernel/keys/root_maxkeys":       "1000000",
	"kernel/keys/root_maxbytes":      "25000000",
	"net/netfilter/nf_conntrack_max": "131072",
}

func renderTemplate(name, text string, data any) ([]byte, error) {
	t, err := template.New(name).Funcs(template.FuncMap{"join": strings.Join}).Parse(text)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return b.Bytes(), nil
}

// nodeScript runs inside the node's own network, mount and PID namespaces. It hides the host
// paths that containerd and the kubelet hard-code behind private mounts, shadows the kernel
// tunables, starts containerd, imports the images, then runs the kubelet and kube-proxy. When
// this script (PID 1 of the namespace) dies, the kernel kills every process of the node, the
// containers included: that is what killing a node means here.
const nodeScript = `#!/bin/bash
set -euo pipefail
echo "node {{.Name}}: pid namespace init $$, netns $(readlink /proc/self/ns/net)"
mount -t tmpfs -o mode=755 node-run /run
mount -t tmpfs -o mode=755 node-varlib /var/lib
mount -t tmpfs -o mode=755 node-varlog /var/log
mkdir -p /run/containerd /var/log/containers /var/lib/cni
for f in {{.SysctlDir}}/*; do
  key=$(basename "$f" | tr . /)
  [ -e "/proc/sys/$key" ] && mount --bind "$f" "/proc/sys/$key"
done

# A node that was killed left its socket behind: only a fresh one means containerd listens.
rm -f {{.ContainerdSock}} {{.ContainerdSock}}.ttrpc
{{.BinDir}}/containerd --config {{.ContainerdTOML}} >>{{.LogDir}}/{{.Name}}-containerd.log 2>&1 &
ctr() { {{.BinDir}}/ctr --address {{.ContainerdSock}} --namespace k8s.io "$@"; }
for i in $(seq 1 600); do ctr version >/dev/null 2>&1 && break; sleep 0.1; done
{{range .Images}}ctr images import --local {{.}} >/dev/null
{{end}}echo "node {{.Name}}: images: $(ctr images ls -q | tr '\n' ' ')"

# The kubelet runs again, with the configuration written meanwhile, when the test bed asked for
# a restart (RestartKubelet); otherwise its exit ends the node. Its system bus is the node's own
# (StartLogind), never the host's.
run_kubelet() {
  while :; do
    DBUS_SYSTEM_BUS_ADDRESS=unix:path={{.BusSocket}} \
    {{.BinDir}}/kubelet --config={{.KubeletConfig}} --kubeconfig={{.KubeletKC}} \
      --root-dir={{.KubeletRoot}} --cert-dir={{.KubeletRoot}}/pki \
      --hostname-override={{.Name}} --node-ip={{.NodeIP}} --v=2 \
      >>{{.LogDir}}/{{.Name}}-kubelet.log 2>&1 || true
    [ -e {{.KubeletRestart}} ] || return 1
    rm -f {{.KubeletRestart}}
    echo "node {{.Name}}: kubelet restarts with a new configuration"
  done
}
run_kubelet &
{{.BinDir}}/kube-proxy --config={{.ProxyConfig}} --v=2 >>{{.LogDir}}/{{.Name}}-kube-proxy.log 2>&1 &
# Any of the three ending ends the node.
wait -n
echo "node {{.Name}}: a component exited; stopping the node"
exit 1
`

// containerdConfig: every path under the node's folder, runc from Debian with cgroupfs (cgroup
// v1 here), and the OOM score never lowered (this VM gives root no CAP_SYS_RESOURCE).
const containerdConfig = `version = 3
root = "{{.ContainerdRoot}}"
state = "{{.ContainerdState}}"
temp = "{{.ContainerdState}}/tmp"

[grpc]
  address = "{{.ContainerdSock}}"
[ttrpc]
  address = "{{.ContainerdSock}}.ttrpc"

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '{{.PauseImage}}'
  [plugins.'io.containerd.cri.v1.runtime']
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    enable_unprivileged_ports = true
    enable_unprivileged_icmp = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '{{.Runc}}'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['{{.CNIBinDir}}']
      conf_dir = '{{.CNIConfDir}}'
      use_internal_loopback = true
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
`

// cniConfig: a bridge with this node's pod /24; no masquerading (pods and nodes route to each
// other, and nothing may leave the machine).
const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "testbed",
  "plugins": [{
    "type": "bridge",
    "bridge": "cni0",
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": "{{.PodCIDR}}", "gateway": "{{.PodGateway}}"}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": "{{.Dir}}/cni/ipam"
    }
  }]
}
`

// kubeletConfig: cgroup v1 with cgroupfs under this node's own cgroup root; no writes to the
// host's firewall, OOM scores or file limits; eviction thresholds that a shared test VM's disk
// never trips by accident. A test may add soft eviction thresholds and graceful node shutdown
// for one node (KubeletSettings).
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: {{.CgroupRoot}}
cgroupsPerQOS: true
containerRuntimeEndpoint: unix://{{.ContainerdSock}}
address: {{.NodeIP}}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: {{.CACert}}}
authorization:
  mode: AlwaysAllow
clusterDNS: [{{.DNSIP}}]
clusterDomain: cluster.local
resolvConf: ""
failSwapOn: false
oomScoreAdj: 0
maxOpenFiles: 20000
makeIPTablesUtilChains: false
protectKernelDefaults: false
podLogsDir: {{.Dir}}/pod-logs
volumePluginDir: {{.Dir}}/volume-plugins
nodeLeaseDurationSeconds: {{.LeaseSeconds}}
nodeStatusUpdateFrequency: {{.StatusEvery}}
nodeStatusReportFrequency: {{.StatusEvery}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 50Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
{{- with .Kubelet.EvictionSoft}}
evictionSoft:
{{- range $signal, $threshold := .}}
  {{$signal}}: "{{$threshold}}"
{{- end}}
evictionSoftGracePeriod:
{{- range $signal, $threshold := .}}
  {{$signal}}: {{$.Kubelet.EvictionSoftGracePeriod}}
{{- end}}
evictionMaxPodGracePeriod: {{$.Kubelet.EvictionMaxPodGracePeriodSeconds}}
{{- end}}
{{- with .Kubelet.ShutdownGracePeriod}}
shutdownGracePeriod: {{.}}
shutdownGracePeriodCriticalPods: {{$.Kubelet.ShutdownGracePeriodCriticalPods}}
{{- end}}
serializeImagePulls: false
`

// proxyConfig: iptables in the node's own network namespace; it leaves the kernel's conntrack
// settings as they are.
const proxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: {{.ProxyKC}}
hostnameOverride: {{.Name}}
bindAddress: {{.NodeIP}}
mode: iptables
clusterCIDR: {{.ClusterCIDR}}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
iptables:
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
`

// corefile serves cluster.local from the apiserver, for the pods of the real nodes, on the
// host's address on their network; any other name is refused (nothing may leave the machine).
const corefile = `cluster.local:53 {
    bind {{.Bind}}
    errors
    kubernetes cluster.local {
        kubeconfig {{.Kubeconfig}}
        pods insecure
    }
    cache 2
}
.:53 {
    bind {{.Bind}}
    errors
}
`
