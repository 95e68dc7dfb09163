package testbed

import (
	"testing"
	"time"
)

func TestCrashLooping(t *testing.T) {
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	for _, tc := range []struct {
		name  string
		exits []time.Time
		want  bool
	}{
		{"a first exit is restarted", []time.Time{now}, false},
		{"a second exit within the window is restarted", []time.Time{ago(time.Minute), now}, false},
		{"a third exit within the window is a crash loop", []time.Time{ago(90 * time.Second), ago(time.Minute), now}, true},
		{"exits older than the window do not count", []time.Time{ago(10 * time.Minute), ago(5 * time.Minute), now}, false},
		{"an exit exactly one window ago no longer counts", []time.Time{ago(crashLoopWindow), ago(time.Second), now}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := crashLooping(tc.exits, now); got != tc.want {
				t.Errorf("crashLooping(%v) = %v, want %v", tc.exits, got, tc.want)
			}
		})
	}
}

// An exited component fails the tests' waits (CheckAlive) only when nothing will start it again.
func TestDownForGood(t *testing.T) {
	for _, tc := range []struct {
		name    string
		givenUp bool
		want    bool
	}{
		{name: ComponentEtcd, want: true},
		{name: ComponentAPIServer, want: true},
		{name: ComponentCoreDNS, want: true},
		{name: ComponentScheduler, want: false},
		{name: ComponentControllerManager, want: false},
		{name: ComponentScheduler, givenUp: true, want: true},
		{name: ComponentControllerManager, givenUp: true, want: true},
	} {
		if got := downForGood(tc.name, tc.givenUp); got != tc.want {
			t.Errorf("downForGood(%s, given up %v) = %v, want %v", tc.name, tc.givenUp, got, tc.want)
		}
	}
}
