package controller

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/wrap"
)

// stopPod is S-0, incarnation inc-1 on node-a, its driver running since an hour before t0, as
// edits leave it.
func stopPod(edits ...func(*corev1.Pod)) *corev1.Pod {
	p := planDriver("inc-1", runningStatus(t0.Add(-time.Hour)))
	for _, edit := range edits {
		edit(p)
	}
	return p
}

// reportedFailed: the pod's phase Failed with the status reason its stopper gives.
func reportedFailed(reason string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Status.Phase, p.Status.Reason = corev1.PodFailed, reason }
}

// markedBy: a DisruptionTarget=True condition with reason, stamped at.
func markedBy(reason string, at time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget,
			Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(at)})
	}
}

// deletedAt: the pod's deletion asked for at at, with grace seconds (0: --force).
func deletedAt(at time.Time, grace int64) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &metav1.Time{Time: at}, &grace
	}
}

// killedAt: the kubelet's SIGTERM ended the driver at at; wrap recorded 143 after the stop.
func killedAt(at time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: terminated(143, wrap.Record(143, "", true), at)}
	}
}

// TestStopOf is the spec of why a driver pod stopped from outside (stopOf), one row per way a
// driver pod is stopped, as the stopper leaves the pod (k8s v1.37: pkg/kubelet/nodeshutdown,
// pkg/kubelet/eviction, pkg/kubelet/preemption, pkg/controller/podgc,
// pkg/controller/tainteviction, the eviction API, the scheduler). Each row is also held to both
// places that record the loss (planLoss on a healthy node, lossAtRelease), which must agree: the
// same record, or none.
func TestStopOf(t *testing.T) {
	marked := t0.Add(-2 * time.Minute) // the DisruptionTarget condition's time
	asked := t0.Add(-time.Minute)      // the deletion's
	killed := marked.Add(-time.Second)
	now := t0
	none := stop{}
	cases := []struct {
		name string
		pod  *corev1.Pod
		want stop // none: not stopped from outside (or not yet as far as the pod tells)
	}{
		{"no pod", nil, none},
		{"a running driver", stopPod(), none},
		{"Failed for another reason (activeDeadlineSeconds): the driver's own", stopPod(reportedFailed("DeadlineExceeded")), none},

		// The kubelet's graceful node shutdown: Failed, reason Terminated, marked
		// TerminationByKubelet once its containers are stopped.
		{"node shutdown, reported", stopPod(killedAt(killed), reportedFailed("Terminated"), markedBy(corev1.PodReasonTerminationByKubelet, marked)),
			stop{Cause: CauseNodeShutdown, Since: marked, ByKubelet: true}},
		{"node shutdown, then deleted by the StatefulSet controller: the kubelet's cause first",
			stopPod(killedAt(killed), reportedFailed("Terminated"), markedBy(corev1.PodReasonTerminationByKubelet, marked), deletedAt(asked, 0)),
			stop{Cause: CauseNodeShutdown, Since: marked, ByKubelet: true}},
		{"node shutdown, marked but not reported Failed yet: its node may die before it ends",
			stopPod(markedBy(corev1.PodReasonTerminationByKubelet, marked)), stop{Cause: CauseNodeShutdown, Since: marked}},
		{"node shutdown by an older kubelet (reason Shutdown, no mark): no time to tell",
			stopPod(killedAt(killed), reportedFailed("Shutdown")), stop{Cause: CauseNodeShutdown, ByKubelet: true}},
		{"rejected by a kubelet restarted during its node's shutdown (reason NodeShutdown, no mark)",
			stopPod(reportedFailed("NodeShutdown")), stop{Cause: CauseNodeShutdown, ByKubelet: true}},

		// The kubelet's eviction manager: marked for node pressure only.
		{"node-pressure eviction", stopPod(killedAt(killed), reportedFailed("Evicted"), markedBy(corev1.PodReasonTerminationByKubelet, marked)),
			stop{Cause: CauseEvicted, Since: marked, ByKubelet: true}},
		{"node-pressure eviction, then deleted by the StatefulSet controller",
			stopPod(killedAt(killed), reportedFailed("Evicted"), markedBy(corev1.PodReasonTerminationByKubelet, marked), deletedAt(asked, 0)),
			stop{Cause: CauseEvicted, Since: marked, ByKubelet: true}},
		// The kubelet's admission handler frees room for a critical pod: Failed, reason
		// Preempting, the same mark (pkg/kubelet/preemption). It frees the node; it is no shutdown.
		{"preempted by its kubelet to admit a critical pod",
			stopPod(killedAt(killed), reportedFailed("Preempting"), markedBy(corev1.PodReasonTerminationByKubelet, marked)),
			stop{Cause: CauseEvicted, Since: marked, ByKubelet: true}},
		{"eviction for its own ephemeral storage (reason Evicted, no mark): the driver's failure, like an OOM kill",
			stopPod(killedAt(killed), reportedFailed("Evicted")), none},
		// The deletion is a stop from outside, but the caller reads the exit first: outcomeOf
		// counts this 143 (evictedForItsOwnUse), so neither place records a loss.
		{"eviction for its own ephemeral storage, then deleted by the StatefulSet controller: the deletion, behind the exit",
			stopPod(killedAt(killed), reportedFailed("Evicted"), deletedAt(asked, 0)), stop{Cause: CausePodDeleted, Since: asked}},

		// Controllers and users stop a driver only by deleting its pod: the deletion is the cause.
		{"eviction API (drain)", stopPod(markedBy("EvictionByEvictionAPI", marked), deletedAt(asked, 30)), stop{Cause: CausePodDeleted, Since: asked}},
		{"eviction API's mark, its deletion not seen yet", stopPod(markedBy("EvictionByEvictionAPI", marked)), stop{Cause: CauseEvicted, Since: marked}},
		{"scheduler preemption", stopPod(markedBy(corev1.PodReasonPreemptionByScheduler, marked), deletedAt(asked, 30)), stop{Cause: CausePodDeleted, Since: asked}},
		{"scheduler preemption's mark, its deletion not seen yet", stopPod(markedBy(corev1.PodReasonPreemptionByScheduler, marked)), stop{Cause: CauseEvicted, Since: marked}},
		{"PodGC on a node that is gone: Failed and marked, deleted at once (its reason is not the kubelet's)",
			stopPod(reportedFailed(""), markedBy("DeletionByPodGC", marked), deletedAt(asked, 0)), stop{Cause: CausePodDeleted, Since: asked}},
		{"taint manager (NoExecute taint not tolerated)", stopPod(markedBy("DeletionByTaintManager", marked), deletedAt(asked, 30)), stop{Cause: CausePodDeleted, Since: asked}},
		{"kubectl delete", stopPod(deletedAt(asked, 30)), stop{Cause: CausePodDeleted, Since: asked}},
		{"kubectl delete --force", stopPod(deletedAt(asked, 0)), stop{Cause: CausePodDeleted, Since: asked}},

		// The kubelet reports the killed container before its mark and the Failed phase
		// (SyncTerminatingPod): until then the pod does not say who stopped it.
		{"the kubelet's kill before its mark", stopPod(killedAt(killed)), none},
		{"the kubelet's kill before its mark, then kubectl delete --force", stopPod(killedAt(killed), deletedAt(asked, 0)), stop{Cause: CausePodDeleted, Since: asked}},
	}
	ready := nodeWith(corev1.ConditionTrue, t0.Add(-2*time.Hour))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := stopOf(tc.pod)
			if ok != (tc.want != none) || got != tc.want {
				t.Errorf("stopOf = %+v, %v; want %+v", got, ok, tc.want)
			}
			if tc.pod == nil || outcomeOf(tc.pod, driverContainer(planPlaceholder(nil))).Exited {
				return // an exit of the driver's own is read first: no loss to record
			}
			var want *lostRecord
			if ok {
				want = got.record(tc.pod.UID, now)
			}
			atRelease := lossAtRelease(tc.pod, planPlaceholder(nil), NodeLoss{}, now)
			if !reflect.DeepEqual(atRelease, want) {
				t.Errorf("lossAtRelease = %+v; want %+v", atRelease, want)
			}
			var planned *lostRecord
			for _, st := range planLoss(lossSnapshot(nil, tc.pod, ready, FromAPIServer, false), time.Minute, now).Steps {
				if r, isRecord := st.(recordLossStep); isRecord {
					planned = r.Record
				}
			}
			if !reflect.DeepEqual(planned, want) {
				t.Errorf("planLoss records %+v; want %+v", planned, want)
			}
		})
	}
}

// TestStopRecord: a stop is recorded since it began, or since now when the pod does not say.
func TestStopRecord(t *testing.T) {
	began := t0.Add(-time.Minute)
	if got := (stop{Cause: CausePodDeleted, Since: began}).record("u", t0); *got != (lostRecord{Pod: "u", Since: began, Cause: CausePodDeleted}) {
		t.Errorf("record = %+v", got)
	}
	if got := (stop{Cause: CauseNodeShutdown}).record("u", t0); *got != (lostRecord{Pod: "u", Since: t0, Cause: CauseNodeShutdown}) {
		t.Errorf("record with no time = %+v", got)
	}
}

// TestFirstLossAgrees: a driver pod deleted on a node that is lost, let go by the Outcomes
// reconciler before the placeholder's pass saw it (a new leader, driverset lost with the node),
// is recorded as planLoss records it: the node's cause, since the node was lost. It was recorded
// pod-deleted, since the deletion, and its recovery told and measured so.
func TestFirstLossAgrees(t *testing.T) {
	lostAt := t0.Add(10 * time.Second)
	outOfService := corev1.Taint{Key: TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}
	for _, tc := range []struct {
		name  string
		lose  func(h *cluster)
		cause string
		since time.Time // zero: when the loss was seen (the Outcomes reconciler's clock)
	}{
		{"its node deleted", func(h *cluster) {
			if err := h.c.Delete(h.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}); err != nil {
				t.Fatal(err)
			}
		}, CauseNodeDeleted, time.Time{}},
		{"its node out of service", func(h *cluster) { h.setNode("node-a", corev1.ConditionUnknown, lostAt, outOfService) },
			CauseOutOfService, lostAt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := runningCluster(t, nil, nil)
			tc.lose(h)
			if err := h.c.Delete(h.ctx, h.driver()); err != nil { // kubectl delete, or PodGC's
				t.Fatal(err)
			}
			h.releaseOutcome()
			if d := h.driver(); d != nil && held(d) {
				t.Fatalf("S-0 still held on a node proven down: %v", d.Finalizers)
			}
			rec := lostOf(h.placeholder())
			if rec == nil || rec.Cause != tc.cause || !tc.since.IsZero() && !rec.Since.Equal(tc.since) {
				t.Errorf("recorded %+v; want cause %s since %v", rec, tc.cause, tc.since)
			}
		})
	}
}
