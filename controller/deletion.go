package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// exitedBeforeDeletion reports whether the exit o recorded in pod happened before anyone asked to
// delete pod: then the driver ended on its own (a drain right after success, say), and its exit
// is the app's outcome, not a stop from outside. An exit of unknown time (no finishedAt) is not
// known to be before anything: it may be the deletion's SIGTERM.
func exitedBeforeDeletion(pod *corev1.Pod, o Outcome) bool {
	return o.Exited && pod.DeletionTimestamp != nil && !o.FinishedAt.IsZero() && o.FinishedAt.Before(deletionRequested(pod))
}

// deletionRequested is when pod's deletion was asked for: the apiserver sets deletionTimestamp to
// that moment plus the grace period, so a driver stopped by the deletion's SIGTERM finishes
// before deletionTimestamp but after this.
func deletionRequested(pod *corev1.Pod) time.Time {
	t := pod.DeletionTimestamp.Time
	if g := pod.DeletionGracePeriodSeconds; g != nil {
		t = t.Add(-time.Duration(*g) * time.Second)
	}
	return t
}
