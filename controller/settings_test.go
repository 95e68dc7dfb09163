package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/driverset/driverset/contract"
)

func TestEffectiveSettings(t *testing.T) {
	const maxR, fence, window = contract.AnnotationMaxRestarts, contract.AnnotationFenceAfter, contract.AnnotationRestartWindow
	cases := []struct {
		name     string
		current  map[string]string // the placeholder's annotations now
		admitted map[string]string // remembered on the StatefulSet when it was made
		cluster  time.Duration     // --fence-after
		want     Effective
		invalid  []string // keys named in the warning
	}{
		{name: "defaults", want: Effective{RestartWindow: contract.DefaultRestartWindow, MaxRestarts: contract.DefaultMaxRestarts}},
		{name: "the cluster's fence-after", cluster: time.Minute,
			want: Effective{RestartWindow: contract.DefaultRestartWindow, MaxRestarts: contract.DefaultMaxRestarts, FenceAfter: time.Minute}},
		{name: "the driver's fence-after wins", cluster: time.Minute, current: map[string]string{fence: "5m"},
			want: Effective{RestartWindow: contract.DefaultRestartWindow, MaxRestarts: contract.DefaultMaxRestarts, FenceAfter: 5 * time.Minute}},
		{name: "fence-after 0 turns fencing off, whatever the cluster's", cluster: time.Minute, current: map[string]string{fence: "0"},
			want: Effective{RestartWindow: contract.DefaultRestartWindow, MaxRestarts: contract.DefaultMaxRestarts, FenceAfter: 0}},
		{name: "valid values, also edited ones, are used", current: map[string]string{maxR: "7", fence: "2m"}, admitted: map[string]string{maxR: "1"},
			want: Effective{RestartWindow: contract.DefaultRestartWindow, MaxRestarts: 7, FenceAfter: 2 * time.Minute}},
		{name: "an invalid edit keeps the admitted value", cluster: time.Minute,
			current:  map[string]string{maxR: "1o", fence: "2 minutes"},
			admitted: map[string]string{maxR: "1", fence: "0"},
			want:     Effective{RestartWindow: contract.DefaultRestartWindow, MaxRestarts: 1, FenceAfter: 0}, invalid: []string{maxR, fence}},
		{name: "an invalid edit with nothing admitted keeps the default", cluster: time.Minute,
			current: map[string]string{maxR: "-1"},
			want:    Effective{RestartWindow: contract.DefaultRestartWindow, MaxRestarts: contract.DefaultMaxRestarts, FenceAfter: time.Minute}, invalid: []string{maxR}},
		{name: "the driver's restart-window", current: map[string]string{window: "6h"},
			want: Effective{RestartWindow: 6 * time.Hour, MaxRestarts: contract.DefaultMaxRestarts}},
		{name: "restart-window 0 never forgets", current: map[string]string{window: "0"},
			want: Effective{RestartWindow: 0, MaxRestarts: contract.DefaultMaxRestarts}},
		{name: "an invalid restart-window edit keeps the admitted one", current: map[string]string{window: "5s"}, admitted: map[string]string{window: "0"},
			want: Effective{RestartWindow: 0, MaxRestarts: contract.DefaultMaxRestarts}, invalid: []string{window}},
		{name: "admitted before the knob existed: the default window", current: map[string]string{maxR: "2"}, admitted: map[string]string{maxR: "2"},
			want: Effective{RestartWindow: contract.DefaultRestartWindow, MaxRestarts: 2}},
		{name: "one invalid key leaves the other valid one alone", current: map[string]string{maxR: "lots", fence: "30s"},
			want: Effective{RestartWindow: contract.DefaultRestartWindow, MaxRestarts: contract.DefaultMaxRestarts, FenceAfter: 30 * time.Second}, invalid: []string{maxR}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, warning := effectiveSettings(tc.current, tc.admitted, tc.cluster)
			if got != tc.want {
				t.Errorf("effectiveSettings = %+v, want %+v", got, tc.want)
			}
			if (warning != "") != (len(tc.invalid) > 0) {
				t.Errorf("warning %q, want one naming %v", warning, tc.invalid)
			}
			for _, k := range tc.invalid {
				if !strings.Contains(warning, k+"=") {
					t.Errorf("warning %q does not name %s", warning, k)
				}
			}
		})
	}
}

// TestAdmittedSettings: what is remembered at creation is what was valid then.
func TestAdmittedSettings(t *testing.T) {
	got := admittedSettings(map[string]string{
		contract.AnnotationMaxRestarts: "2", contract.AnnotationFenceAfter: "soon", "other": "x",
	})
	if len(got) != 1 || got[contract.AnnotationMaxRestarts] != "2" {
		t.Errorf("admittedSettings = %v, want only max-restarts 2", got)
	}
}
