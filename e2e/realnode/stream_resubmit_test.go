//go:build testbed

package realnode

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/spark"
)

// TestStreamDeletedAndResubmittedWhileItsNodeIsCutOff is the usual upgrade of a stream (issue 33,
// "delete and resubmit"): the user deletes the app (`kubectl delete pod <driver>`, which waits
// until the pod is gone) and submits it again, under the same name, onto the same checkpoint. Here
// the driver's node has just been cut off from the control plane, its driver still running and
// the shared storage still reachable from it. The deleted placeholder must stay until the old
// driver has stopped (wrap's self-fencing, T 15 s; driverset fences it, then lets the placeholder
// go), so the resubmission cannot start a second writer of the checkpoint: the host's process
// table shows the old JVM gone before the placeholder, and the new app resumes from the checkpoint
// with every value committed once. Spark 4.1.1's file sink; make e2e-streams only.
func TestStreamDeletedAndResubmittedWhileItsNodeIsCutOff(t *testing.T) {
	if os.Getenv(streamsEnv) != "all" {
		t.Skipf("a make e2e-streams case (%s=all)", streamsEnv)
	}
	d, err := spark.Find(bed.images.spark, "4.1.1")
	if err != nil {
		t.Skipf("Spark 4.1.1 is not among the images: %v", err)
	}
	shared := newSharedStorage(t)
	ns := namespace(t, nil)
	bindHeartbeat(t, ns, "default")
	job := sparkJob{
		resilient: true, namespace: ns, class: spark.StreamClass, conf: shared.conf(),
		args: []string{"/shared/checkpoint", "/shared/out", fmt.Sprint(streamRows), fmt.Sprint(streamBatches), fmt.Sprint(streamBatchMillis)},
	}
	job.conf["spark.executor.instances"] = "1"
	job.conf["spark.sql.shuffle.partitions"] = "2"
	job.conf["spark.kubernetes.driver.annotation."+contract.AnnotationSelfFence] = streamSelfFence.String()
	var cutAt, goneAt, oldExit, newSeen time.Time
	var overlap bool
	var cutNode string
	first := runSparkJob(t, d, job, func(t *testing.T, r *sparkRun) {
		running := waitDriverLog(t, r, reStreamCommitted, streamKillAfter)
		cutNode = running.node
		w := watchDrivers(t, ns, cutNode)
		cutAt = time.Now()
		if err := bed.cluster.PartitionNode(cutNode); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = bed.cluster.HealNode(cutNode) })
		t.Logf("cut %s, the driver's node, off the control plane with the stream running", cutNode)
		placeholder := r.app.Name + "-driver"
		if err := kube().CoreV1().Pods(ns).Delete(context.Background(), placeholder, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// As `kubectl delete pod` does: wait until the pod is gone.
		waitFor(t, 3*time.Minute, "the deleted placeholder gone", func(ctx context.Context) (bool, error) {
			_, err := kube().CoreV1().Pods(ns).Get(ctx, placeholder, metav1.GetOptions{})
			return apierrors.IsNotFound(err), notGoneErr(err)
		})
		goneAt = time.Now()
		oldExit, newSeen, overlap = w.stop()
	})
	t.Logf("spark-submit of the deleted app returned %d, phases %v", first.code, first.phases())
	if err := bed.cluster.HealNode(cutNode); err != nil {
		t.Fatal(err)
	}
	t.Logf("the old driver's JVM gone %.1fs after the cut (T %s); the deleted placeholder gone %.1fs after the cut",
		oldExit.Sub(cutAt).Seconds(), streamSelfFence, goneAt.Sub(cutAt).Seconds())
	switch {
	case oldExit.IsZero():
		t.Fatalf("the deleted placeholder was let go while the old driver's JVM still ran on %s", cutNode)
	case !goneAt.After(oldExit):
		t.Errorf("the deleted placeholder was let go (%s) before the old driver's JVM ended (%s)",
			goneAt.Format(time.StampMilli), oldExit.Format(time.StampMilli))
	case overlap || !newSeen.IsZero():
		t.Errorf("a driver JVM of the namespace ran on another node while the old one ran on %s (seen %s)", cutNode, newSeen.Format(time.StampMilli))
	}

	// The same app, submitted again onto the same checkpoint, as soon as its name is free.
	job.prepare = nil
	second := runSparkJob(t, d, job, nil)
	if second.code != 0 || last(second.phases()) != "Succeeded" {
		t.Errorf("the resubmitted app: spark-submit exited %d, phases %v; want 0 and Succeeded", second.code, second.phases())
	}
	drivers := second.driverLogs()
	if len(drivers) == 0 {
		t.Fatal("the resubmitted app ran no driver")
	}
	resumed, err := spark.ResumedAt([]byte(drivers[0].log))
	switch {
	case err != nil:
		t.Errorf("the resubmitted driver's resume: %v", err)
	case resumed < streamKillAfter:
		t.Errorf("the resubmitted driver resumed at batch %d; the first had committed at least %d batches", resumed, streamKillAfter)
	}
	t.Logf("the resubmitted driver on %s resumed at batch %d", drivers[0].node, resumed)
	if err := spark.CheckFileSink(shared.host("/shared/out"), streamRows, streamBatches); err != nil {
		t.Errorf("exactly once: %v", err)
	} else {
		t.Logf("exactly once: the output of %d batches of %d values is what a run without loss gives", streamBatches, streamRows)
	}
}

// notGoneErr is a poll's error worth stopping for: anything but the pod being there or not.
func notGoneErr(err error) error {
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
