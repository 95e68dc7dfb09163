package wrap

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxTerminationMessageBytes is the kubelet's limit for one container's termination message.
const MaxTerminationMessageBytes = 4096

// messagePrefix starts the first line of every message wrap writes; it is what tells wrap's
// messages apart from anything else a container may leave in its termination log.
const messagePrefix = "driverset-exit-code="

// TerminationMessage is what wrap writes to the termination log for exit code code (0–255) and a
// human-readable detail, which may be empty: "driverset-exit-code=<code>" then, when detail is not
// empty, a newline and detail. The detail is cut (at a rune boundary) so that the whole message
// stays within MaxTerminationMessageBytes.
func TerminationMessage(code int, detail string) string {
	return terminationMessage(code, detail, MaxTerminationMessageBytes)
}

// terminationMessage is TerminationMessage within limit bytes.
func terminationMessage(code int, detail string, limit int) string {
	head := messagePrefix + strconv.Itoa(code)
	if detail == "" {
		return head
	}
	msg := head + "\n" + detail
	if len(msg) <= limit {
		return msg
	}
	cut := limit
	for cut > len(head)+1 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut]
}

// ParseTerminationMessage returns the exit code recorded in msg; ok is false when msg is not one
// of wrap's (its first line is not exactly "driverset-exit-code=" and a canonical decimal 0–255).
func ParseTerminationMessage(msg string) (code int, ok bool) {
	line, _, _ := strings.Cut(msg, "\n")
	digits, found := strings.CutPrefix(line, messagePrefix)
	if !found || digits == "" || len(digits) > 3 || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	code, err := strconv.Atoi(digits)
	if err != nil || code > 255 {
		return 0, false
	}
	return code, true
}

// notStartedPrefix starts the detail of every message wrap writes when it did not start the
// driver (ExitWrapFailed): it records nothing then, so the kubelet's next start of the container
// tries again, and that start may run the driver. Such a message is no exit of the driver.
const notStartedPrefix = "not starting the driver: "

// notStartedMessage is the termination message of a start in which wrap did not start the driver,
// for the reason why.
func notStartedMessage(why string) string {
	return TerminationMessage(ExitWrapFailed, notStartedPrefix+why)
}

// DriverNotStarted reports whether msg is the termination message of a container start in which
// wrap did not start the driver (see notStartedPrefix): the controller must not take it for the
// driver's exit.
func DriverNotStarted(msg string) bool {
	_, ok := NotStarted(msg)
	return ok
}

// NotStarted returns the detail of msg ("not starting the driver: " and why) when msg is the
// termination message of a start in which wrap did not start the driver; ok is false otherwise.
func NotStarted(msg string) (detail string, ok bool) {
	code, ok := ParseTerminationMessage(msg)
	_, detail, _ = strings.Cut(msg, "\n")
	if !ok || code != ExitWrapFailed || !strings.HasPrefix(detail, notStartedPrefix) {
		return "", false
	}
	return detail, true
}

// logPrefix starts every line wrap writes to the container's stderr (Options.logf).
const logPrefix = "driverset wrap: "

// LoggedExit returns the driver's exit code as wrap last logged it in log, a driver container's
// log (wrap's lines among the driver's own output). When the driver ends, wrap logs the detail
// of its termination message, which names the code ("exited with code N", "recorded as exit
// code N", "(exit code N)"). The log is what says how the driver ended when the pod no longer
// does: for a pod deleted right after its kubelet stopped it, the kubelet may write only
// ContainerStatusUnknown. ok is false when no such line is in log.
func LoggedExit(log string) (code int, ok bool) {
	for _, line := range strings.Split(log, "\n") {
		detail, found := strings.CutPrefix(line, logPrefix)
		if !found {
			continue
		}
		for _, marker := range []string{"exited with code ", "exit code "} {
			i := strings.LastIndex(detail, marker)
			if i < 0 {
				continue
			}
			digits := detail[i+len(marker):]
			n := 0
			for n < len(digits) && digits[n] >= '0' && digits[n] <= '9' {
				n++
			}
			if c, err := strconv.Atoi(digits[:n]); err == nil && c <= 255 {
				code, ok = c, true
				break
			}
		}
	}
	return code, ok
}
