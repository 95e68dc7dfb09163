package inspect

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// list shows each placeholder once, with its current driver pod and node when there is one; the
// driver pods themselves, plain pods, and a pod that only shares a driver pod's name are not rows.
func TestRows(t *testing.T) {
	running := *placeholder()
	running.CreationTimestamp = metav1.NewTime(t0)
	running.Annotations = map[string]string{contract.AnnotationRestarts: "1", contract.AnnotationRestartsTotal: "4"}
	d := *driverPod("d0", "n1")
	waiting := *placeholder()
	waiting.Name, waiting.Namespace, waiting.Status.Phase = "etl-driver", "other", ""
	impostor := *driverPod("x", "n9") // named like etl-driver's driver pod, without driverset's label
	impostor.Name, impostor.Namespace, impostor.Labels, impostor.OwnerReferences = "etl-driver-0", "other", nil, nil
	plain := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "jobs"}}

	rows := Rows(Listed{Pods: []corev1.Pod{d, plain, impostor, running, waiting}, StatefulSets: []appsv1.StatefulSet{*statefulSet()}})
	want := []Row{
		{Namespace: "jobs", Name: "pi-driver", Phase: corev1.PodRunning, Outcome: "Running", Restarts: 1, TotalRestarts: 4,
			DriverPod: "pi-driver-0", Node: "n1", Created: t0},
		{Namespace: "other", Name: "etl-driver", Outcome: "Pending"},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v, want %+v", rows, want)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, rows[i], want[i])
		}
	}

	var out strings.Builder
	if err := WriteRows(&out, rows, true, t0.Add(90*time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"NAMESPACE   NAME         PHASE     RESTARTS       DRIVER POD    NODE     AGE\n",
		"jobs        pi-driver    Running   1 (4 in all)   pi-driver-0   n1       90m\n",
		"other       etl-driver   Pending   0 (0 in all)   <none>        <none>   <unknown>\n",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("list has no line %q:\n%s", line, out.String())
		}
	}
}
