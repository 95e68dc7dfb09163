package controller

import "time"

// Bounds of waitRequeue.
const (
	minWaitRequeue = time.Second
	maxWaitRequeue = 30 * time.Second
)

// waitRequeue is how long a placeholder that has waited for waited (its StatefulSet's name taken,
// stale executors that will not go) waits before it is looked at again: a quarter of the wait so
// far, at least 1 s and at most 30 s. A short wait (executors terminating) is seen through quickly;
// one that lasts (a finalizer that holds an executor for good) costs a look every 30 s, not every
// second, so a stuck app does not keep a worker busy. Events still bring a look at once (an
// executor's deletion, the StatefulSet's).
func waitRequeue(waited time.Duration) time.Duration {
	return min(max(waited/4, minWaitRequeue), maxWaitRequeue)
}
