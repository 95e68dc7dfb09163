package convert

import (
	"errors"
	"path"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// FuzzSettingsOf feeds arbitrary annotation values (each present or absent) to the settings
// parser. The contract: an accepted setting is in range and reads back the same from its
// canonical spelling (what the StatefulSet remembers); a refused one is a *NotConvertible that
// names an annotation the pod carries; nothing panics.
func FuzzSettingsOf(f *testing.F) {
	f.Add("3", "2m", "/opt/entrypoint.sh", "1h", uint8(15))
	f.Add("101", "-1s", "opt/entrypoint.sh", "59s", uint8(15))
	f.Add("+7", "1h2m3.5s", "/", "720h0m0.000000001s", uint8(11))
	f.Add("0x10", "0", "//a/../b", "0", uint8(9))
	f.Add("", "", "", "", uint8(0))
	f.Fuzz(func(t *testing.T, maxRestarts, fenceAfter, entrypoint, restartWindow string, present uint8) {
		values := map[string]string{}
		for i, kv := range [][2]string{
			{contract.AnnotationMaxRestarts, maxRestarts},
			{contract.AnnotationFenceAfter, fenceAfter},
			{contract.AnnotationEntrypoint, entrypoint},
			{contract.AnnotationRestartWindow, restartWindow},
		} {
			if present&(1<<i) != 0 {
				values[kv[0]] = kv[1]
			}
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: values}}
		s, err := SettingsOf(pod)
		if err != nil {
			var nc *NotConvertible
			if !errors.As(err, &nc) {
				t.Fatalf("refused with %T %v, want a *NotConvertible", err, err)
			}
			named := false
			for k := range values {
				named = named || strings.Contains(nc.Reason, k)
			}
			if !named {
				t.Fatalf("refusal %q names no annotation the pod carries (%v)", nc.Reason, values)
			}
			return
		}
		if s.MaxRestarts < 0 || s.MaxRestarts > MaxMaxRestarts || s.FenceAfter < 0 || !path.IsAbs(s.Entrypoint) ||
			s.RestartWindow != 0 && (s.RestartWindow < MinRestartWindow || s.RestartWindow > MaxRestartWindow) {
			t.Fatalf("accepted %v as %+v, out of range", values, s)
		}
		canonical := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			contract.AnnotationMaxRestarts:   strconv.Itoa(s.MaxRestarts),
			contract.AnnotationFenceAfter:    s.FenceAfter.String(),
			contract.AnnotationEntrypoint:    s.Entrypoint,
			contract.AnnotationRestartWindow: s.RestartWindow.String(),
		}}}
		again, err := SettingsOf(canonical)
		if err != nil || again != s {
			t.Fatalf("%v read as %+v; its canonical spelling %v reads as %+v, %v", values, s, canonical.Annotations, again, err)
		}
	})
}
