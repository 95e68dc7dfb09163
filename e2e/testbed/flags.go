package testbed

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Network layout. Nothing here is ever dialled: the Service range only needs to exist, and pod
// and node IPs are fake (kwok hands them out). Only 127.0.0.1 carries traffic.
const (
	serviceCIDR = "10.96.0.0/16"
	// One /24 per KWOK node, 10.244.<index>.0/24, so per-node kwok processes never hand out the
	// same pod IP twice.
	podCIDRFormat = "10.244.%d.0/24"
	nodeIPFormat  = "10.243.0.%d"
	maxNodeIndex  = 254
)

// layout is everything the component command lines are built from.
type layout struct {
	Dir string
	// APIHost is the address the apiserver listens on and every client dials: 127.0.0.1, or
	// the host's address on the real nodes' network when there are real nodes.
	APIHost                string
	EtcdClientPort         int
	EtcdPeerPort           int
	APIServerPort          int
	ControllerManagerPort  int
	SchedulerPort          int
	NodeMonitorGracePeriod time.Duration
	PodEvictionTimeout     time.Duration
	PKI                    pkiFiles
	ControllerManagerKC    string
	SchedulerKC            string
	AdminKC                string
	KwokConfig             string
	// AdmissionConfig presents the apiserver's client certificate to admission webhooks.
	AdmissionConfig string
	// AuditPolicy and AuditLog are the apiserver's audit policy and log files; "" for none.
	AuditPolicy, AuditLog string
}

func (l layout) etcdURL() string { return "http://127.0.0.1:" + strconv.Itoa(l.EtcdClientPort) }

func etcdArgs(l layout, dataDir string) []string {
	peer := "http://127.0.0.1:" + strconv.Itoa(l.EtcdPeerPort)
	return []string{
		"--name=testbed",
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + l.etcdURL(),
		"--advertise-client-urls=" + l.etcdURL(),
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=testbed=" + peer,
		"--initial-cluster-state=new",
		// A throw-away cluster: durability is not worth the fsync latency.
		"--unsafe-no-fsync",
	}
}

// admissionPlugins are the plugins a production cluster runs that matter to driverset: quota
// and limits see the placeholder, webhooks do the conversion, DefaultTolerationSeconds makes
// eviction follow PodEvictionTimeout.
const admissionPlugins = "NamespaceLifecycle,LimitRanger,ServiceAccount,DefaultTolerationSeconds," +
	"Priority,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ResourceQuota"

func apiserverArgs(l layout) []string {
	toleration := strconv.Itoa(ceilSeconds(l.PodEvictionTimeout))
	args := []string{
		"--bind-address=" + l.APIHost,
		"--advertise-address=" + l.APIHost,
		"--secure-port=" + strconv.Itoa(l.APIServerPort),
		"--etcd-servers=" + l.etcdURL(),
		"--service-cluster-ip-range=" + serviceCIDR,
		// The endpoints reconciler would publish 127.0.0.1 for the kubernetes Service, which
		// endpoint validation rejects; clients use 127.0.0.1 directly anyway.
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + l.PKI.APIServerCert,
		"--tls-private-key-file=" + l.PKI.APIServerKey,
		"--client-ca-file=" + l.PKI.CACert,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=" + admissionPlugins,
		"--admission-control-config-file=" + l.AdmissionConfig,
		"--allow-privileged=true",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + l.PKI.SAPub,
		"--service-account-signing-key-file=" + l.PKI.SAKey,
		// Without the front-proxy (requestheader) settings the controller-manager and scheduler
		// keep logging "missing content for CA bundle".
		"--requestheader-client-ca-file=" + l.PKI.FrontProxyCACert,
		"--requestheader-allowed-names=" + userFrontProxy,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + l.PKI.FrontProxyClientCert,
		"--proxy-client-key-file=" + l.PKI.FrontProxyClient,
		"--default-not-ready-toleration-seconds=" + toleration,
		"--default-unreachable-toleration-seconds=" + toleration,
		// Real kubelets: the apiserver authenticates to them for logs and exec.
		"--kubelet-client-certificate=" + l.PKI.KubeletClientCert,
		"--kubelet-client-key=" + l.PKI.KubeletClientKey,
		"--kubelet-preferred-address-types=InternalIP",
	}
	if l.APIHost != "127.0.0.1" {
		// Real nodes: publish the apiserver's address in the kubernetes Service (pods reach it
		// through kube-proxy), and call webhooks at their pods' IPs, which the host routes to,
		// rather than at Service IPs, which only the nodes' kube-proxies translate.
		for i, a := range args {
			if a == "--endpoint-reconciler-type=none" {
				args[i] = "--endpoint-reconciler-type=lease"
			}
		}
		args = append(args, "--enable-aggregator-routing=true")
	}
	return append(args, auditArgs(l)...)
}

func controllerManagerArgs(l layout) []string {
	return []string{
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(l.ControllerManagerPort),
		"--kubeconfig=" + l.ControllerManagerKC,
		"--authentication-kubeconfig=" + l.ControllerManagerKC,
		"--authorization-kubeconfig=" + l.ControllerManagerKC,
		// Everything on by default: StatefulSet, garbage collector, node lifecycle, taint
		// eviction, PodGC and the ServiceAccount token controllers are what the tests exercise.
		"--controllers=*",
		"--node-monitor-grace-period=" + l.NodeMonitorGracePeriod.String(),
		"--service-account-private-key-file=" + l.PKI.SAKey,
		"--root-ca-file=" + l.PKI.CACert,
		"--use-service-account-credentials=true",
		"--cluster-signing-cert-file=" + l.PKI.CACert,
		"--cluster-signing-key-file=" + l.PKI.CAKey,
		"--leader-elect=false",
	}
}

func schedulerArgs(l layout) []string {
	return []string{
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(l.SchedulerPort),
		"--kubeconfig=" + l.SchedulerKC,
		"--authentication-kubeconfig=" + l.SchedulerKC,
		"--authorization-kubeconfig=" + l.SchedulerKC,
		"--leader-elect=false",
	}
}

// kwokArgs runs one kwok as the kubelet of one node. kwok opens no port unless given
// --server-address or --node-port, so the per-node processes cannot collide.
func kwokArgs(l layout, node string, index int) []string {
	return []string{
		"--kubeconfig=" + l.AdminKC,
		"--config=" + l.KwokConfig,
		"--manage-single-node=" + node,
		"--cidr=" + fmt.Sprintf(podCIDRFormat, index),
		"--node-ip=" + fmt.Sprintf(nodeIPFormat, index),
		"--node-lease-duration-seconds=" + strconv.Itoa(leaseSeconds(l.NodeMonitorGracePeriod)),
	}
}

// leaseSeconds picks the node Lease duration for a grace period. kwok renews the Lease every
// duration/4 (like a kubelet); a renewal interval close to the grace period would make live
// nodes flap to Unknown, so the Lease is half the grace period (renewed every grace/8), at
// least 2 s. A revived kwok waits for the dead one's Lease to expire, so it must stay short.
func leaseSeconds(grace time.Duration) int {
	return max(2, int(grace.Seconds()/2))
}

// ceilSeconds rounds up to whole seconds (toleration flags take integers), at least 1.
func ceilSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
