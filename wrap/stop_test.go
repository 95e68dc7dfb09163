package wrap

import (
	"strings"
	"testing"
)

// TestRecordSaysWhetherTheDriverWasStopped: every end of the driver that wrap records says whether
// a stop from outside (SIGTERM or SIGINT, forwarded) came before it, on a last line the controller
// reads (StopOf) and that older controllers, which read the first line and the detail's start,
// pass over. A message without it is an older wrap's, or a record wrap made without running the
// driver: unknown.
func TestRecordSaysWhetherTheDriverWasStopped(t *testing.T) {
	long := strings.Repeat("é", MaxTerminationMessageBytes)
	cases := []struct {
		name      string
		msg       string
		code      int
		stopped   bool
		known     bool
		selfFence bool
	}{
		{name: "exited by itself", msg: Record(1, "the driver command x exited with code 1", false), code: 1, known: true},
		{name: "stopped from outside", msg: Record(143, "the driver command x exited with code 143", true), code: 143, stopped: true, known: true},
		{name: "no detail", msg: Record(0, "", false), code: 0, known: true},
		{name: "a detail past the kubelet's limit keeps the stop line", msg: Record(143, long, true), code: 143, stopped: true, known: true},
		{name: "self-fenced, the prefix still first", msg: Record(143, selfFencedDetail("no heartbeat", "the driver command x was killed"), false), code: 143, known: true, selfFence: true},
		{name: "an older wrap's message: unknown", msg: TerminationMessage(143, "the driver command x exited with code 143"), code: 143},
		{name: "a line like it inside the detail is not the stop line", msg: TerminationMessage(1, "driverset-stop=signal\nmore"), code: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.msg) > MaxTerminationMessageBytes {
				t.Errorf("message of %d bytes, over the kubelet's %d", len(tc.msg), MaxTerminationMessageBytes)
			}
			code, ok := ParseTerminationMessage(tc.msg)
			if !ok || code != tc.code {
				t.Errorf("ParseTerminationMessage = %d, %v; want %d", code, ok, tc.code)
			}
			stopped, known := StopOf(tc.msg)
			if stopped != tc.stopped || known != tc.known {
				t.Errorf("StopOf = %v, %v; want %v, %v", stopped, known, tc.stopped, tc.known)
			}
			if IsSelfFenced(tc.msg) != tc.selfFence || DriverNotStarted(tc.msg) {
				t.Errorf("IsSelfFenced = %v (want %v), DriverNotStarted = %v", IsSelfFenced(tc.msg), tc.selfFence, DriverNotStarted(tc.msg))
			}
		})
	}
}
