package controller

import (
	"strings"
	"testing"
	"time"
)

// The admin's bounds are the spec of what a tenant may ask of fencing (issue 11).
func TestBounds(t *testing.T) {
	admin := Bounds{FenceAfterMin: 30 * time.Second, FenceAfterMax: 10 * time.Minute,
		SelfFenceMin: 20 * time.Second, SelfFenceMax: 5 * time.Minute, Namespaces: []string{"spark"}}
	cases := []struct {
		name                string
		b                   Bounds
		ns                  string
		fenceAfter, self    time.Duration
		wantAfter, wantSelf time.Duration
		warn                []string // the warning names these; none: no warning
	}{
		{name: "off stays off", b: admin, ns: "other"},
		{name: "within the bounds: as asked", b: admin, ns: "spark", fenceAfter: time.Minute, self: time.Minute,
			wantAfter: time.Minute, wantSelf: time.Minute},
		{name: "at the floors: as asked, no warning", b: admin, ns: "spark", fenceAfter: 30 * time.Second, self: 20 * time.Second,
			wantAfter: 30 * time.Second, wantSelf: 20 * time.Second},
		{name: "at the ceilings: as asked, no warning", b: admin, ns: "spark", fenceAfter: 10 * time.Minute, self: 5 * time.Minute,
			wantAfter: 10 * time.Minute, wantSelf: 5 * time.Minute},
		{name: "fence-after 1ns is raised to the floor", b: admin, ns: "spark", fenceAfter: time.Nanosecond,
			wantAfter: 30 * time.Second, warn: []string{"fence-after 1ns", "floor", "30s"}},
		{name: "above the ceilings: lowered", b: admin, ns: "spark", fenceAfter: time.Hour, self: time.Hour,
			wantAfter: 10 * time.Minute, wantSelf: 5 * time.Minute, warn: []string{"fence-after 1h0m0s", "self-fence 1h0m0s", "ceiling"}},
		{name: "self-fence below its floor: raised", b: admin, ns: "spark", self: time.Second,
			wantSelf: 20 * time.Second, warn: []string{"self-fence 1s", "floor"}},
		{name: "a namespace the admin did not allow: no fencing at all", b: admin, ns: "tenant-x", fenceAfter: time.Minute, self: time.Minute,
			warn: []string{"fencing is off in namespace tenant-x", "--fence-namespaces"}},
		{name: "no bounds: as asked, even 1ns", ns: "any", fenceAfter: time.Nanosecond, self: time.Nanosecond,
			wantAfter: time.Nanosecond, wantSelf: time.Nanosecond},
		{name: "no ceiling when 0", b: Bounds{FenceAfterMin: time.Second}, ns: "any", fenceAfter: 100 * time.Hour, wantAfter: 100 * time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			after, self, warn := tc.b.bound(tc.ns, tc.fenceAfter, tc.self)
			if after != tc.wantAfter || self != tc.wantSelf {
				t.Errorf("bound = %v, %v; want %v, %v", after, self, tc.wantAfter, tc.wantSelf)
			}
			if len(tc.warn) == 0 && warn != "" {
				t.Errorf("warning %q, want none", warn)
			}
			for _, w := range tc.warn {
				if !strings.Contains(warn, w) {
					t.Errorf("warning %q does not say %q", warn, w)
				}
			}
		})
	}
}
