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
