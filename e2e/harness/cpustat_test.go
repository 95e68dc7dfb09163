package harness

import (
	"os"
	"testing"
	"time"
)

func TestParseCPUTimes(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       CPUTimes
		bad        bool
	}{
		{name: "guest time is not counted twice", line: "cpu  100 1 20 300 4 0 5 70 9 9\n", want: CPUTimes{Total: 500, Steal: 70}},
		{name: "no guest columns", line: "cpu 1 2 3 4 5 6 7 8", want: CPUTimes{Total: 36, Steal: 8}},
		{name: "no steal column", line: "cpu 1 2 3 4 5 6 7", bad: true},
		{name: "one CPU's line", line: "cpu0 1 2 3 4 5 6 7 8", bad: true},
		{name: "not a number", line: "cpu 1 2 3 4 5 6 7 x", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCPUTimes(tc.line)
			if (err != nil) != tc.bad || got != tc.want {
				t.Errorf("parseCPUTimes(%q) = %+v, %v; want %+v, error %v", tc.line, got, err, tc.want, tc.bad)
			}
		})
	}
	if share := (CPUTimes{Total: 100, Steal: 10}).StealShare(CPUTimes{Total: 300, Steal: 60}); share != 0.25 {
		t.Errorf("steal share %v, want 0.25", share)
	}
	if _, err := ReadCPUTimes(); err != nil {
		t.Errorf("this machine's /proc/stat: %v", err)
	}
}

func TestParseProcessCPU(t *testing.T) {
	// A real line's shape (fields 1-17), with a command name that holds ") (" and spaces.
	const line = "4242 (kube apiserver) (x)) S 1 4242 4242 0 -1 4194560 2 0 0 0 1234 567 0 0 20 0 12 0 9 0 0"
	for _, tc := range []struct {
		name, stat string
		want       time.Duration
		bad        bool
	}{
		{name: "utime plus stime, in hundredths of a second", stat: line, want: 18010 * time.Millisecond},
		{name: "no command name", stat: "4242 S 1 2", bad: true},
		{name: "cut short", stat: "4242 (a) S 1 4242 4242 0 -1 4194560 2 0 0 0 1234", bad: true},
		{name: "not a number", stat: "4242 (a) S 1 4242 4242 0 -1 4194560 2 0 0 0 x 567", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcessCPU(tc.stat)
			if (err != nil) != tc.bad || got != tc.want {
				t.Errorf("parseProcessCPU(%q) = %v, %v; want %v, error %v", tc.stat, got, err, tc.want, tc.bad)
			}
		})
	}
	if _, err := ProcessCPU(os.Getpid()); err != nil {
		t.Errorf("this process's /proc/<pid>/stat: %v", err)
	}
}
