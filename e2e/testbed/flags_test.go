package testbed

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func testLayout() layout {
	return layout{
		Dir: "/d", APIHost: "127.0.0.1", EtcdClientPort: 1001, EtcdPeerPort: 1002, APIServerPort: 1003,
		ControllerManagerPort: 1004, SchedulerPort: 1005,
		NodeMonitorGracePeriod: 10 * time.Second, PodEvictionTimeout: 1500 * time.Millisecond,
		PKI:                 pkiFiles{CACert: "/d/pki/ca.crt", SAKey: "/d/pki/sa.key", SAPub: "/d/pki/sa.pub"},
		ControllerManagerKC: "/d/cm.kubeconfig", SchedulerKC: "/d/s.kubeconfig", AdminKC: "/d/admin.kubeconfig",
		KwokConfig: "/d/kwok.yaml",
	}
}

// realNodesLayout: the apiserver on the real nodes' network.
func realNodesLayout() layout {
	l := testLayout()
	l.APIHost = realHostIP
	return l
}

// TestComponentFlags lists, per component, flags the issue requires with their exact values.
func TestComponentFlags(t *testing.T) {
	l := testLayout()
	cases := []struct {
		component string
		args      []string
		want      []string
	}{
		{"etcd", etcdArgs(l, "/d/etcd"), []string{
			"--unsafe-no-fsync", "--data-dir=/d/etcd",
			"--listen-client-urls=http://127.0.0.1:1001", "--listen-peer-urls=http://127.0.0.1:1002",
		}},
		{"kube-apiserver", apiserverArgs(l), []string{
			"--bind-address=127.0.0.1", "--secure-port=1003", "--etcd-servers=http://127.0.0.1:1001",
			"--authorization-mode=Node,RBAC", "--endpoint-reconciler-type=none",
			"--default-not-ready-toleration-seconds=2", "--default-unreachable-toleration-seconds=2",
			"--service-account-key-file=/d/pki/sa.pub", "--service-account-signing-key-file=/d/pki/sa.key",
			"--requestheader-allowed-names=front-proxy-client",
		}},
		{"kube-apiserver with real nodes", apiserverArgs(realNodesLayout()), []string{
			"--bind-address=10.77.0.1", "--advertise-address=10.77.0.1", "--endpoint-reconciler-type=lease",
			"--enable-aggregator-routing=true", "--kubelet-preferred-address-types=InternalIP",
		}},
		{"kube-controller-manager", controllerManagerArgs(l), []string{
			"--controllers=*", "--node-monitor-grace-period=10s", "--leader-elect=false",
			"--kubeconfig=/d/cm.kubeconfig", "--service-account-private-key-file=/d/pki/sa.key",
			"--root-ca-file=/d/pki/ca.crt", "--bind-address=127.0.0.1", "--secure-port=1004",
		}},
		{"kube-scheduler", schedulerArgs(l), []string{
			"--kubeconfig=/d/s.kubeconfig", "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=1005",
		}},
		{"kwok", kwokArgs(l, "n7", 7), []string{
			"--manage-single-node=n7", "--cidr=10.244.7.0/24", "--node-ip=10.243.0.7",
			"--config=/d/kwok.yaml", "--kubeconfig=/d/admin.kubeconfig", "--node-lease-duration-seconds=5",
		}},
	}
	for _, c := range cases {
		t.Run(c.component, func(t *testing.T) {
			for _, w := range c.want {
				if !slices.Contains(c.args, w) {
					t.Errorf("missing %s in %q", w, c.args)
				}
			}
			seen := map[string]bool{}
			for _, a := range c.args {
				name, _, _ := strings.Cut(a, "=")
				if seen[name] {
					t.Errorf("flag %s given twice", name)
				}
				seen[name] = true
			}
		})
	}
}

func TestAdmissionPlugins(t *testing.T) {
	args := strings.Join(apiserverArgs(testLayout()), " ")
	for _, p := range []string{"NamespaceLifecycle", "LimitRanger", "ServiceAccount", "DefaultTolerationSeconds",
		"MutatingAdmissionWebhook", "ValidatingAdmissionWebhook", "ResourceQuota", "Priority"} {
		if !strings.Contains(args, p) {
			t.Errorf("admission plugin %s not enabled", p)
		}
	}
}

func TestLeaseSeconds(t *testing.T) {
	for _, c := range []struct {
		grace time.Duration
		want  int
	}{
		{10 * time.Second, 5}, // renewed every 1.25 s: far inside the grace period
		{40 * time.Second, 20},
		{time.Second, 2}, // never below 2 s
	} {
		if got := leaseSeconds(c.grace); got != c.want {
			t.Errorf("leaseSeconds(%v) = %d, want %d", c.grace, got, c.want)
		}
	}
}

func TestCeilSeconds(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{{10 * time.Second, 10}, {1500 * time.Millisecond, 2}, {time.Millisecond, 1}, {0, 1}} {
		if got := ceilSeconds(c.d); got != c.want {
			t.Errorf("ceilSeconds(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

func TestMissingBinariesIsAnError(t *testing.T) {
	t.Setenv(EnvBinDir, "")
	for _, dir := range []string{"", t.TempDir()} {
		_, err := Start(t.Context(), Options{BinDir: dir})
		if err == nil {
			t.Fatalf("Start(BinDir=%q) succeeded", dir)
		}
		if !strings.Contains(err.Error(), "make e2e") || !strings.Contains(err.Error(), EnvBinDir) {
			t.Errorf("error does not say how to get the binaries: %v", err)
		}
	}
}
