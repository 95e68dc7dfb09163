package wrap

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTerminationMessageFormat(t *testing.T) {
	cases := []struct {
		code   int
		detail string
		want   string
	}{
		{0, "", "driverset-exit-code=0"},
		{1, "the driver command /opt/entrypoint.sh exited with code 1", "driverset-exit-code=1\nthe driver command /opt/entrypoint.sh exited with code 1"},
		{137, "two\nlines", "driverset-exit-code=137\ntwo\nlines"},
	}
	for _, tc := range cases {
		if got := TerminationMessage(tc.code, tc.detail); got != tc.want {
			t.Errorf("TerminationMessage(%d, %q) = %q, want %q", tc.code, tc.detail, got, tc.want)
		}
	}
}

func TestTerminationMessageRoundTrip(t *testing.T) {
	details := map[string]string{
		"empty":                "",
		"short":                "boom",
		"multi-line":           "a\nb\n",
		"looks like a message": "driverset-exit-code=9",
		"too long":             strings.Repeat("x", 10000),
		"too long, multi-byte": strings.Repeat("é€", 3000),
		// Not UTF-8: no byte starts a character, so the cut finds no boundary in the detail, and
		// must still not cut into the first line.
		"too long, no character starts": strings.Repeat("\x80", 5000),
	}
	for _, code := range []int{0, 1, 125, 126, 127, 137, 143, 255} {
		for name, detail := range details {
			msg := TerminationMessage(code, detail)
			if got, ok := ParseTerminationMessage(msg); !ok || got != code {
				t.Errorf("%s, %d: parsed %d, %v", name, code, got, ok)
			}
			if len(msg) > MaxTerminationMessageBytes {
				t.Errorf("%s, %d: %d bytes, over the kubelet's limit", name, code, len(msg))
			}
			if utf8.ValidString(detail) && !utf8.ValidString(msg) {
				t.Errorf("%s, %d: cut inside a character", name, code)
			}
			if head := messagePrefix + strconv.Itoa(code) + "\n"; detail != "" &&
				(!strings.HasPrefix(msg, head) || !strings.HasPrefix(detail, msg[len(head):])) {
				t.Errorf("%s, %d: %q is not the first line, a newline and the start of the detail", name, code, msg)
			}
			if len(detail) < 4000 && !strings.HasSuffix(msg, detail) {
				t.Errorf("%s, %d: detail lost from %q", name, code, msg)
			}
		}
	}
}

func TestParseTerminationMessage(t *testing.T) {
	cases := []struct {
		msg    string
		code   int
		wrapps bool
	}{
		{"driverset-exit-code=0", 0, true},
		{"driverset-exit-code=255", 255, true},
		{"driverset-exit-code=143\nanything at all", 143, true},
		{"driverset-exit-code=1\n", 1, true},

		{"", 0, false},
		{"Error: something else wrote this", 0, false},
		{"driverset-exit-code=", 0, false},
		{"driverset-exit-code=256", 0, false},
		{"driverset-exit-code=1000", 0, false},
		{"driverset-exit-code=-1", 0, false},
		{"driverset-exit-code=+1", 0, false},
		{"driverset-exit-code=01", 0, false},
		{"driverset-exit-code=1x", 0, false},
		{"driverset-exit-code=1 ", 0, false},
		{"driverset-exit-code=1\r\n", 0, false},
		{" driverset-exit-code=1", 0, false},
		{"prefix\ndriverset-exit-code=1", 0, false},
	}
	for _, tc := range cases {
		code, ok := ParseTerminationMessage(tc.msg)
		if ok != tc.wrapps || code != tc.code {
			t.Errorf("ParseTerminationMessage(%q) = %d, %v; want %d, %v", tc.msg, code, ok, tc.code, tc.wrapps)
		}
	}
}

func FuzzParseTerminationMessage(f *testing.F) {
	for _, seed := range []string{"", "driverset-exit-code=0", "driverset-exit-code=137\nlost", "driverset-exit-code=256",
		"driverset-exit-code=01", "exit 1", "driverset-exit-code=1\r\n", strings.Repeat("é", 3000)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		code, ok := ParseTerminationMessage(msg)
		if !ok {
			if code != 0 {
				t.Errorf("not wrap's, yet code %d", code)
			}
		} else {
			if code < 0 || code > 255 {
				t.Errorf("code %d out of range", code)
			}
			// A message wrap accepts is one it could have written.
			_, detail, _ := strings.Cut(msg, "\n")
			if TerminationMessage(code, detail) != msg && len(msg) <= MaxTerminationMessageBytes && detail != "" {
				t.Errorf("%q is not what TerminationMessage(%d, %q) writes", msg, code, detail)
			}
		}
		// Whatever the detail, the message fits and parses back.
		c := len(msg) % 256
		out := TerminationMessage(c, msg)
		if got, ok := ParseTerminationMessage(out); !ok || got != c {
			t.Errorf("TerminationMessage(%d, %q) parsed as %d, %v", c, msg, got, ok)
		}
		if len(out) > MaxTerminationMessageBytes {
			t.Errorf("%d bytes", len(out))
		}
	})
}

// TestDriverNotStarted: only wrap's message for a start in which it did not start the driver
// says so; the driver's own exit 125, or any other record, is an exit.
func TestDriverNotStarted(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want bool
	}{
		{notStartedMessage("state directory /s: not a directory"), true},
		{notStartedMessage("self-fencing is on and its heartbeat Lease d-0-heartbeat could not be held: refused"), true},
		{TerminationMessage(ExitWrapFailed, "the driver exited with code 125"), false},
		{TerminationMessage(ExitWrapFailed, ""), false},
		{TerminationMessage(1, notStartedPrefix+"a driver that prints wrap's words exits 1"), false},
		{notStartedPrefix + "no record line", false},
		{"", false},
	} {
		if got := DriverNotStarted(tc.msg); got != tc.want {
			t.Errorf("DriverNotStarted(%q) = %v, want %v", tc.msg, got, tc.want)
		}
		// NotStarted gives what the placeholder tells: the detail, wrap's words first.
		if detail, ok := NotStarted(tc.msg); ok != tc.want || ok && (!strings.HasPrefix(detail, notStartedPrefix) || !strings.HasSuffix(tc.msg, detail)) {
			t.Errorf("NotStarted(%q) = %q, %v", tc.msg, detail, ok)
		}
	}
}
