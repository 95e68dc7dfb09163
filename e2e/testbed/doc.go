// Package testbed runs a real, throw-away Kubernetes control plane on 127.0.0.1 for driverset's
// end-to-end tests: etcd, kube-apiserver, kube-controller-manager and kube-scheduler, with one
// kwok process per fake node playing that node's kubelet. No container ever runs: pods go
// Running with fake IPs from their node's /24, and a node "dies" when its kwok is killed.
//
// The binaries come from hack/testbed-build.sh (Options.BinDir or $DRIVERSET_TESTBED_BIN);
// without them Start returns an error and StartT fails the test. Nothing is ever skipped.
//
// One test bed for a whole test binary, without package state: start it in a parent test and
// run the scenarios as (parallel) subtests; t.Cleanup stops it after the last one.
//
//	func TestE2E(t *testing.T) {
//		c := testbed.StartT(t, testbed.Options{})
//		t.Run("x", func(t *testing.T) { t.Parallel(); ... c.AddNode(ctx, "x-a") ... })
//	}
//
// The controller-manager and the scheduler run under a supervisor (supervise.go), as under a
// kubelet: either one that exits by itself (the scheduler does on purpose when its cache is
// corrupted) is restarted a second later, unless it crash-loops. etcd and the apiserver are not:
// their exit fails the next wait, with the end of their log.
//
// With Start in a TestMain instead, call StopOnSignal so Ctrl-C still stops it cleanly.
// Either way every component runs in its own process group with Pdeathsig=SIGKILL, so even a
// SIGKILLed or timed-out test process leaves no component behind (only its temp Dir).
//
// Measured on the 2-core dev machine with the defaults (NodeMonitorGracePeriod and
// PodEvictionTimeout 10 s), StatefulSet of one replica:
//
//	Start (2 nodes Ready, default ServiceAccount)   10-16 s
//	AddNode until Ready                             0.4-0.6 s
//	StatefulSet pod Running                         0.2-0.4 s
//	KillNode -> node Unknown                        ~13 s (grace + 5 s monitor period)
//	KillNode -> pod Terminating (evicted)           ~24 s, then never replaced
//	out-of-service taint on the dead node -> new pod Running   ~5 s
//	DeleteNode -> new pod Running on another node    ~59 s (PodGC: 40 s quarantine, 20 s period)
//	ReviveNode -> Ready, old pod gone, new pod Running          4-5 s
//	Stop                                            ~1.2 s
package testbed
