package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/wrap"
)

// TestOutcomeOfWhatWrapSays is outcomeOf on the records of a wrap that says whether a stop from
// outside came before the driver's end (wrap.Record, issue 34): an end by itself is the driver's
// exit, whatever marks or deletes the pod after it; an end after a stop is decided by what stopped
// the pod, once the pod shows it, and by nothing before.
func TestOutcomeOfWhatWrapSays(t *testing.T) {
	const uid = types.UID("incarnation-1")
	ended := t0.Add(-time.Minute)
	killed := corev1.ContainerStatus{State: corev1.ContainerState{Terminated: terminated(143, wrap.Record(143, "", true), ended)}}
	exited := corev1.ContainerStatus{State: corev1.ContainerState{Terminated: terminated(1, wrap.Record(1, "", false), ended)}}
	// wrap idles after the end, restarted by the kubelet: the end is in lastState.
	restarted := func(cs corev1.ContainerStatus) corev1.ContainerStatus {
		return corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, LastTerminationState: cs.State}
	}
	deleted := func(p *corev1.Pod) *corev1.Pod {
		p.DeletionTimestamp = &metav1.Time{Time: ended.Add(-10 * time.Second)} // asked for before the end
		return p
	}
	counted := func(code int, stopped bool) Outcome {
		return Outcome{Exited: true, Code: code, FinishedAt: ended, PodUID: uid, Stopped: stopped, ByItself: !stopped}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want Outcome
	}{
		{"killed, the kubelet's report before its mark (phase Running, nothing else): nothing decided yet",
			withDriverStatus(uid, killed), Outcome{}},
		{"killed, then marked for a node shutdown: a stop, no outcome",
			disrupted(withDriverStatus(uid, killed), "Terminated", corev1.PodReasonTerminationByKubelet), Outcome{}},
		{"killed, then marked for node pressure: a stop, no outcome",
			disrupted(withDriverStatus(uid, killed), "Evicted", corev1.PodReasonTerminationByKubelet), Outcome{}},
		{"killed for a deletion (a drain): a stop, no outcome", deleted(withDriverStatus(uid, killed)), Outcome{}},
		{"killed for the pod's own storage use (Evicted, no mark): the driver's failure",
			disrupted(withDriverStatus(uid, killed), "Evicted", ""), counted(143, true)},
		{"killed for its own storage use, then deleted by the StatefulSet controller: still the driver's failure",
			deleted(disrupted(withDriverStatus(uid, killed), "Evicted", "")), counted(143, true)},
		{"killed, then started again by the kubelet (a liveness probe): the driver's failure",
			withDriverStatus(uid, restarted(killed)), counted(143, true)},
		{"exited 1 by itself: the driver's exit", withDriverStatus(uid, exited), counted(1, false)},
		{"exited 1 by itself, then the node shut down before a restart: still the driver's exit",
			disrupted(withDriverStatus(uid, exited), "Terminated", corev1.PodReasonTerminationByKubelet), counted(1, false)},
		{"exited 1 by itself while a deletion was on its way: the driver's exit",
			deleted(withDriverStatus(uid, exited)), counted(1, false)},
		{"exited 0 after a stop: a success all the same",
			withDriverStatus(uid, corev1.ContainerStatus{State: corev1.ContainerState{Terminated: terminated(0, wrap.Record(0, "", true), ended)}}),
			Outcome{Exited: true, Code: 0, FinishedAt: ended, PodUID: uid, Stopped: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := outcomeOf(tc.pod, "spark-kubernetes-driver"); got != tc.want {
				t.Errorf("outcomeOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}
