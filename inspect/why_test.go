package inspect

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// TestTimeline is the spec of `kubectl driverset why`: the Events of the placeholder, the
// StatefulSet and every incarnation of its pod, merged in time order whichever Events API wrote
// them; the controller's decisions and its open loss record marked; nothing about other objects.
func TestTimeline(t *testing.T) {
	p := placeholder()
	p.Annotations = map[string]string{contract.AnnotationDriverLost: `{"pod":"d1","since":"2026-11-30T10:03:00Z","cause":"node-unreachable"}`}
	s := &Snapshot{Placeholder: p, Names: contract.NamesFor("pi-driver"), Events: []corev1.Event{
		// Fetched per object, so not in time order.
		event("Pod", "pi-driver", "p-uid", "Converted", ControllerName, at(1)),
		event("Pod", "pi-driver", "p-uid", "NodeLost", ControllerName, at(70)),
		event("Pod", "pi-driver", "p-uid", ReasonRecovered, ControllerName, at(95)),
		legacyEvent("StatefulSet", "pi-driver", "s-uid", "SuccessfulCreate", "statefulset-controller", "", at(2), 2),
		legacyEvent("Pod", "pi-driver-0", "d0aaaaaaaaaa", "Scheduled", "default-scheduler", "", at(3), 1),
		legacyEvent("Pod", "pi-driver-0", "d0aaaaaaaaaa", "Started", "kubelet", "n1", at(4), 1),
		legacyEvent("Pod", "pi-driver-0", "d1bbbbbbbbbb", "Scheduled", "default-scheduler", "", at(90), 1),
		legacyEvent("Service", "pi-driver", "x", "Other", "someone", "", at(50), 1),         // another kind, same name
		legacyEvent("Pod", "pi-driver-0-heartbeat", "x", "Other", "someone", "", at(50), 1), // another object
	}}
	s.Events[2].Series = &corev1.EventSeries{Count: 3}
	type row struct{ object, reason, from string }
	want := []row{
		{"placeholder", "Converted", ControllerName},
		{"statefulset/pi-driver", "SuccessfulCreate", "statefulset-controller"},
		{"pod/pi-driver-0 [d0aaaaaa]", "Scheduled", "default-scheduler"},
		{"pod/pi-driver-0 [d0aaaaaa]", "Started", "kubelet on n1"},
		{"placeholder", "NodeLost", ControllerName},
		{"pod/pi-driver-0 [d1bbbbbb]", "Scheduled", "default-scheduler"},
		{"placeholder", ReasonRecovered, ControllerName},
		{"placeholder", "DriverLost", ControllerName},
	}
	got := Timeline(s)
	var rows []row
	for _, e := range got {
		rows = append(rows, row{e.Object, e.Reason, e.From})
		if e.Decision != (e.From == ControllerName) {
			t.Errorf("%s %s: decision %v", e.Object, e.Reason, e.Decision)
		}
	}
	if len(rows) != len(want) {
		t.Fatalf("Timeline has %d entries, want %d:\n%v", len(rows), len(want), rows)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("entry %d = %v, want %v", i, rows[i], want[i])
		}
	}
	if got[1].Count != 2 || got[6].Count != 3 {
		t.Errorf("counts %d (core/v1 count), %d (series), want 2 and 3", got[1].Count, got[6].Count)
	}

	var b bytes.Buffer
	if err := WriteTimeline(&b, got); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"*Converted", "SuccessfulCreate (x2)", "*Recovered (x3)", "2026-11-30T10:00:01Z", "* a decision of driverset's controller"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("why output lacks %q:\n%s", want, b.String())
		}
	}
}

// An Event that carries only its creation time still has a place in the order.
func TestTimelineFallsBackToCreationTime(t *testing.T) {
	e := legacyEvent("Pod", "pi-driver", "p-uid", "Old", "x", "", metav1.Time{}, 1)
	e.LastTimestamp = metav1.Time{}
	e.CreationTimestamp = at(30)
	s := &Snapshot{Placeholder: placeholder(), Names: contract.NamesFor("pi-driver"), Events: []corev1.Event{
		event("Pod", "pi-driver", "p-uid", "Later", ControllerName, at(40)), e,
	}}
	if got := Timeline(s); len(got) != 2 || got[0].Reason != "Old" || !got[0].Time.Equal(at(30).Time) {
		t.Errorf("Timeline = %+v", got)
	}
}

// Within one second the order is the apiserver's (resourceVersion): the statefulset-controller's
// Event has whole seconds, driverset's microseconds, and comparing those would misplace it.
func TestTimelineOrdersOneSecondAsStored(t *testing.T) {
	converted := event("Pod", "pi-driver", "p-uid", "Converted", ControllerName, metav1.NewTime(at(2).Add(900*time.Millisecond)))
	converted.ResourceVersion = "1009"
	created := legacyEvent("StatefulSet", "pi-driver", "s-uid", "SuccessfulCreate", "statefulset-controller", "", at(2), 1)
	created.ResourceVersion = "1010"
	running := event("Pod", "pi-driver", "p-uid", "DriverRunning", ControllerName, metav1.NewTime(at(2).Add(950*time.Millisecond)))
	running.ResourceVersion = "1012"
	s := &Snapshot{Placeholder: placeholder(), Names: contract.NamesFor("pi-driver"), Events: []corev1.Event{running, created, converted}}
	var got []string
	for _, e := range Timeline(s) {
		got = append(got, e.Reason)
	}
	if strings.Join(got, " ") != "Converted SuccessfulCreate DriverRunning" {
		t.Errorf("order %v, want Converted SuccessfulCreate DriverRunning", got)
	}
}

func TestWriteTimelineEmpty(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTimeline(&b, nil); err != nil || !strings.Contains(b.String(), "No Events") {
		t.Errorf("empty timeline printed %q, %v", b.String(), err)
	}
}
