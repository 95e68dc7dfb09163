package controller

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// liveKnobs are the knobs a user may change on a running app: read on every reconcile. (The
// entrypoint is built into the StatefulSet when it is made.)
func liveKnobs() []string {
	return []string{contract.AnnotationMaxRestarts, contract.AnnotationRestartWindow, contract.AnnotationFenceAfter}
}

// Effective are the settings the controller acts on for one driver.
type Effective struct {
	MaxRestarts int
	// RestartWindow: the driver's annotation when set (0 never forgets), else the default, also for
	// an app admitted before the knob existed.
	RestartWindow time.Duration
	// FenceAfter: the driver's annotation when set (0 turns fencing off), else the cluster's.
	FenceAfter time.Duration
}

// effectiveSettings is each live knob from the placeholder's annotations (current) when valid. The
// webhook refuses an invalid value at admission; one edited onto a running app afterwards keeps
// the value admitted (remembered on the StatefulSet when it was made), else the default, and is
// named in the returned warning.
func effectiveSettings(current, admitted map[string]string, clusterFenceAfter time.Duration) (Effective, string) {
	e := Effective{MaxRestarts: contract.DefaultMaxRestarts, RestartWindow: contract.DefaultRestartWindow, FenceAfter: clusterFenceAfter}
	var invalid []string
	for _, key := range liveKnobs() {
		v, ok := current[key]
		if !ok {
			continue
		}
		s, err := parseKnob(key, v)
		if err != nil {
			invalid = append(invalid, fmt.Sprintf("%s=%q", key, v))
			if v, ok = admitted[key]; !ok {
				continue
			}
			if s, err = parseKnob(key, v); err != nil {
				continue
			}
		}
		switch key {
		case contract.AnnotationMaxRestarts:
			e.MaxRestarts = s.MaxRestarts
		case contract.AnnotationRestartWindow:
			e.RestartWindow = s.RestartWindow
		case contract.AnnotationFenceAfter:
			e.FenceAfter = s.FenceAfter
		}
	}
	if len(invalid) == 0 {
		return e, ""
	}
	return e, fmt.Sprintf("invalid annotation %s ignored: the last valid value (or the default) is kept", strings.Join(invalid, ", "))
}

// parseKnob parses one annotation with convert's parser (the webhook's, the one place for it).
func parseKnob(key, value string) (convert.Settings, error) {
	return convert.SettingsOf(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{key: value}}})
}

// admittedSettings are the live knobs of annotations that are valid: what the StatefulSet
// remembers when it is made from an admitted placeholder.
func admittedSettings(annotations map[string]string) map[string]string {
	out := map[string]string{}
	for _, key := range liveKnobs() {
		if v, ok := annotations[key]; ok {
			if _, err := parseKnob(key, v); err == nil {
				out[key] = v
			}
		}
	}
	return out
}

// rememberSettings writes the admitted live knobs onto the StatefulSet about to be made.
func rememberSettings(sts *appsv1.StatefulSet, placeholder *corev1.Pod) error {
	b, err := json.Marshal(admittedSettings(placeholder.Annotations))
	if err != nil {
		return err
	}
	metav1.SetMetaDataAnnotation(&sts.ObjectMeta, contract.AnnotationAdmittedSettings, string(b))
	return nil
}

// rememberedSettings reads what rememberSettings wrote (nothing on a StatefulSet made before it).
func rememberedSettings(sts *appsv1.StatefulSet) map[string]string {
	var m map[string]string
	_ = json.Unmarshal([]byte(sts.Annotations[contract.AnnotationAdmittedSettings]), &m)
	return m
}

// fencing is the fence-after and self-fence T the driver of p gets: its knobs (fenceAfter, already
// resolved; self-fence from p's annotation, used when the StatefulSet is made) within the admin's
// Bounds, and a warning saying what the bounds changed. An invalid self-fence was refused at
// admission; one edited in later is off.
func (r *Placeholder) fencing(p *corev1.Pod, fenceAfter time.Duration) (time.Duration, time.Duration, string) {
	return fencingOf(r.Bounds, p, fenceAfter)
}

// fencingOf is fencing with the admin's bounds b.
func fencingOf(b Bounds, p *corev1.Pod, fenceAfter time.Duration) (time.Duration, time.Duration, string) {
	var selfFence time.Duration
	if v, ok := p.Annotations[contract.AnnotationSelfFence]; ok {
		if s, err := parseKnob(contract.AnnotationSelfFence, v); err == nil {
			selfFence = s.SelfFence
		}
	}
	return b.bound(p.Namespace, fenceAfter, selfFence)
}

// joinWarnings joins the non-empty warnings.
func joinWarnings(ws ...string) string {
	var out []string
	for _, w := range ws {
		if w != "" {
			out = append(out, w)
		}
	}
	return strings.Join(out, "; ")
}
