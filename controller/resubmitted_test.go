package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// TestReconcileClearsTheExecutorsOfAResubmittedDStream (issue 33): a DStream app restores its whole
// SparkConf from its checkpoint but for a short reload list (Spark's Checkpoint.createSparkConf:
// the driver's host, ports and pod name, the executor name prefix), so when it is submitted again
// under another name onto an old checkpoint, its executors carry the executor labels of the app
// that wrote the checkpoint: driverset.dev/driver=<that app's StatefulSet>, not this one's. They
// are this app's all the same: their controller is this app's driver pod (its name is reloaded).
// When this app's driver is lost, the next incarnation must wait until they are gone, as for any
// earlier incarnation's executors, and they must be deleted.
func TestReconcileClearsTheExecutorsOfAResubmittedDStream(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.reconcile()
	h.setNode("node-a", corev1.ConditionTrue, t0)
	const oldDriver = types.UID("5d1f0c8e-old-incarnation")
	// The checkpoint's app: another StatefulSet, another app id, long gone.
	h.makeExecutorOf("stream-v1-driver", "stream-exec-1", "node-a", "spark-checkpointed-app-id", h.names.DriverPodName(), oldDriver)
	// Another app of that name still running in the namespace: never this app's.
	h.makeExecutorOf("stream-v1-driver", "other-exec-1", "node-a", "spark-checkpointed-app-id", "stream-v1-driver-0", "uid-v1-driver")
	h.deletes = nil

	d := h.startIncarnation("", contract.GateStaleExecutors)
	h.setDriverStatus(pendingStatus())
	h.reconcile()
	if !convert.HasGate(&h.driver().Spec, contract.GateStaleExecutors) {
		t.Fatal("gate lifted while an executor of the previous incarnation (labelled for the checkpoint's app) remains")
	}
	deleted := map[string]bool{}
	for _, del := range h.deletes {
		deleted[del.name] = true
	}
	if !deleted["stream-exec-1"] {
		t.Errorf("the previous incarnation's executor was not deleted (deletes %+v)", h.deletes)
	}
	if deleted["other-exec-1"] {
		t.Error("another app's executor was deleted")
	}
	checkStatus(t, h.placeholder(), corev1.PodPending, "waiting", false, "1 executor(s)")

	h.stopped("stream-exec-1")
	h.reconcile()
	if convert.HasGate(&h.driver().Spec, contract.GateStaleExecutors) {
		t.Errorf("gate still on %s after the previous incarnation's executor is gone", d.Name)
	}
}
