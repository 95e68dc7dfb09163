package controller

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
)

func TestLoggedEventsWritesOneLinePerDecision(t *testing.T) {
	var out bytes.Buffer
	log := funcr.NewJSON(func(obj string) { out.WriteString(obj + "\n") }, funcr.Options{})
	fake := events.NewFakeRecorder(1)
	rec := LoggedEvents(fake, log)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "spark", Name: "pi-driver"}}
	s0 := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "spark", Name: "pi-driver-0"}}
	rec.Eventf(p, s0, corev1.EventTypeWarning, "Fenced", "Fenced", "force-deleted driver pod %s", "spark/pi-driver-0")

	if got := <-fake.Events; got != "Warning Fenced force-deleted driver pod spark/pi-driver-0" {
		t.Errorf("event = %q: the Event must still be recorded", got)
	}
	var line map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &line); err != nil {
		t.Fatalf("not one JSON line: %q: %v", out.String(), err)
	}
	want := map[string]any{"msg": "decision", "namespace": "spark", "pod": "pi-driver", "reason": "Fenced",
		"type": "Warning", "related": "pi-driver-0", "message": "force-deleted driver pod spark/pi-driver-0"}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s = %v, want %v (line %s)", k, line[k], v, out.String())
		}
	}
}
