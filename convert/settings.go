package convert

import (
	"path"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/contract"
)

// MaxMaxRestarts bounds driverset.dev/max-restarts: a typo such as 1000 should be refused, not obeyed.
const MaxMaxRestarts = 100

// Bounds of driverset.dev/restart-window (besides 0, never forget): under a minute a crash loop
// would be forgotten between its backoffs; over 30 days is almost surely a typo.
const (
	MinRestartWindow = time.Minute
	MaxRestartWindow = 30 * 24 * time.Hour
)

// Settings are the user's knobs, read from the driver pod's annotations.
type Settings struct {
	// MaxRestarts is how many process failures are restarted; node-loss recoveries are not counted.
	MaxRestarts int
	// RestartWindow (contract.AnnotationRestartWindow): a failure after a run at least this long
	// forgets the restarts counted before; 0 never forgets.
	RestartWindow time.Duration
	// Entrypoint is the image's entrypoint, run when the driver container has no command.
	Entrypoint string
	// FenceAfter is how long the driver's node may be unreachable before its pod is force-deleted; 0 is off.
	FenceAfter time.Duration
	// SelfFence is T of self-fencing (contract.AnnotationSelfFence): wrap stops the driver when it
	// cannot renew its heartbeat for this long; 0 is off.
	SelfFence time.Duration
}

// SettingsOf parses the pod's driverset annotations, with defaults for the absent ones. An invalid
// value is a *NotConvertible saying which annotation and what a valid one looks like.
func SettingsOf(pod *corev1.Pod) (Settings, error) {
	s := Settings{MaxRestarts: contract.DefaultMaxRestarts, RestartWindow: contract.DefaultRestartWindow, Entrypoint: contract.DefaultEntrypoint}
	a := pod.Annotations
	if v, ok := a[contract.AnnotationMaxRestarts]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > MaxMaxRestarts {
			return Settings{}, notConvertible(pod, "annotation %s=%q is not an integer from 0 to %d; for example "+
				"--conf spark.kubernetes.driver.annotation.%s=%d", contract.AnnotationMaxRestarts, v, MaxMaxRestarts,
				contract.AnnotationMaxRestarts, contract.DefaultMaxRestarts)
		}
		s.MaxRestarts = n
	}
	if v, ok := a[contract.AnnotationRestartWindow]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d != 0 && (d < MinRestartWindow || d > MaxRestartWindow) {
			return Settings{}, notConvertible(pod, "annotation %s=%q is not 0 or a duration from %s to %s such as %q "+
				"(a driver that ran this long before it failed has its restarts forgotten; 0 never forgets)",
				contract.AnnotationRestartWindow, v, ShortDuration(MinRestartWindow), ShortDuration(MaxRestartWindow),
				ShortDuration(contract.DefaultRestartWindow))
		}
		s.RestartWindow = d
	}
	if v, ok := a[contract.AnnotationFenceAfter]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return Settings{}, notConvertible(pod, "annotation %s=%q is not a duration of 0 or more such as \"2m\" "+
				"(0 turns fencing off)", contract.AnnotationFenceAfter, v)
		}
		s.FenceAfter = d
	}
	if v, ok := a[contract.AnnotationSelfFence]; ok {
		d, err := parseSelfFence(v)
		if err != nil {
			return Settings{}, notConvertible(pod, "annotation %s=%q is not %q or a duration of 0 or more such as \"2m\" "+
				"(0 turns self-fencing off)", contract.AnnotationSelfFence, v, contract.SelfFenceOn)
		}
		s.SelfFence = d
	}
	entrypoint, err := entrypointOf(pod)
	if err != nil {
		return Settings{}, err
	}
	s.Entrypoint = entrypoint
	return s, nil
}

// entrypointOf is the image's entrypoint from the pod's annotation, or the default.
func entrypointOf(pod *corev1.Pod) (string, error) {
	v, ok := pod.Annotations[contract.AnnotationEntrypoint]
	if !ok {
		return contract.DefaultEntrypoint, nil
	}
	if !path.IsAbs(v) {
		return "", notConvertible(pod, "annotation %s=%q is not an absolute path such as %q",
			contract.AnnotationEntrypoint, v, contract.DefaultEntrypoint)
	}
	return v, nil
}

// parseSelfFence reads a self-fence value: "on" is contract.DefaultSelfFence.
func parseSelfFence(v string) (time.Duration, error) {
	if v == contract.SelfFenceOn {
		return contract.DefaultSelfFence, nil
	}
	d, err := time.ParseDuration(v)
	if err == nil && d < 0 {
		err = strconv.ErrRange
	}
	return d, err
}

// ShortDuration is d as a user writes it: "1h", not "1h0m0s".
func ShortDuration(d time.Duration) string {
	out := d.String()
	for _, zero := range []string{"0s", "0m"} {
		if len(out) > len(zero) {
			out = strings.TrimSuffix(out, zero)
		}
	}
	return out
}
