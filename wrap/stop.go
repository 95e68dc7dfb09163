package wrap

import "strings"

// stopLinePrefix starts the last line of every record of the driver's end that wrap makes when it
// ran the driver: "driverset-stop=signal" when a stop from outside (SIGTERM or SIGINT, which wrap
// forwarded) came before the driver ended, "driverset-stop=none" when it ended by itself. The
// kubelet sends SIGTERM only to stop a container: a pod's deletion, its node's graceful shutdown,
// a node-pressure eviction, a failed liveness probe. The controller cannot tell the first three
// from the driver's own exit by times (the kubelet reports the killed container before it marks
// the pod, and marks it only once every container stopped), so wrap says it (issue 34).
//
// Last, not first: controllers before it read the first line (the code) and the start of the
// detail (self-fenced, not started), and pass over the rest.
const stopLinePrefix = "\ndriverset-stop="

const (
	stopSignal = "signal"
	stopNone   = "none"
)

// Record is the termination message wrap records for the driver's end: TerminationMessage's,
// its detail cut so that the stop line always fits within MaxTerminationMessageBytes.
func Record(code int, detail string, stopped bool) string {
	line := stopLinePrefix + stopNone
	if stopped {
		line = stopLinePrefix + stopSignal
	}
	return terminationMessage(code, detail, MaxTerminationMessageBytes-len(line)) + line
}

// StopOf reports whether msg, a record of wrap's, says that a stop from outside came before the
// driver ended (stopped), and whether it says either (known: false for a wrap before this line
// existed, and for a record wrap made without running the driver).
func StopOf(msg string) (stopped, known bool) {
	if _, ok := ParseTerminationMessage(msg); !ok {
		return false, false
	}
	i := strings.LastIndex(msg, stopLinePrefix)
	if i < 0 {
		return false, false
	}
	switch msg[i+len(stopLinePrefix):] {
	case stopSignal:
		return true, true
	case stopNone:
		return false, true
	}
	return false, false
}
