package controller

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Bounds are the admin's limits on fencing (serve's --fence-* and --self-fence-* flags): tenants
// choose fence-after and self-fence for their drivers, within these. Zero values bound nothing.
type Bounds struct {
	// FenceAfterMin and FenceAfterMax bound fence-after; a value outside is raised to the floor or
	// lowered to the ceiling (0: no ceiling).
	FenceAfterMin, FenceAfterMax time.Duration
	// SelfFenceMin and SelfFenceMax bound self-fencing's T likewise.
	SelfFenceMin, SelfFenceMax time.Duration
	// Namespaces are the only namespaces whose drivers may be fenced (either way); empty: all.
	Namespaces []string
}

// mayFence reports whether drivers in ns may be fenced at all.
func (b Bounds) mayFence(ns string) bool {
	return len(b.Namespaces) == 0 || slices.Contains(b.Namespaces, ns)
}

// bound applies b to the fence-after and self-fence a driver in ns asks for (0: off), and says in a
// warning what it changed and why. Off stays off.
func (b Bounds) bound(ns string, fenceAfter, selfFence time.Duration) (time.Duration, time.Duration, string) {
	if fenceAfter <= 0 && selfFence <= 0 {
		return 0, 0, ""
	}
	if !b.mayFence(ns) {
		return 0, 0, fmt.Sprintf("fencing is off in namespace %s: the admin allows it only in %v (serve --fence-namespaces)", ns, b.Namespaces)
	}
	var warnings []string
	clamp := func(what string, d, lo, hi time.Duration) time.Duration {
		switch {
		case d <= 0:
			return d
		case d < lo:
			warnings = append(warnings, fmt.Sprintf("%s %s is below the admin's floor: %s is used", what, d, lo))
			return lo
		case hi > 0 && d > hi:
			warnings = append(warnings, fmt.Sprintf("%s %s is above the admin's ceiling: %s is used", what, d, hi))
			return hi
		}
		return d
	}
	fenceAfter = clamp("fence-after", fenceAfter, b.FenceAfterMin, b.FenceAfterMax)
	selfFence = clamp("self-fence", selfFence, b.SelfFenceMin, b.SelfFenceMax)
	return fenceAfter, selfFence, strings.Join(warnings, "; ")
}
