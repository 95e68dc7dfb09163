package inspect

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// TestStatusOf is the spec of `kubectl driverset status`: what it says for each state of an app.
func TestStatusOf(t *testing.T) {
	names := contract.NamesFor("pi-driver")
	cases := []struct {
		name string
		snap func() *Snapshot
		want Status
	}{
		{
			name: "running: the real pod, its node, no restart, no recovery",
			snap: func() *Snapshot {
				return &Snapshot{Placeholder: placeholder(), Names: names, StatefulSet: statefulSet(), Driver: driverPod("d0", "n1"), Node: readyNode("n1")}
			},
			want: Status{
				Outcome: "Running", StatefulSet: "pi-driver", Service: "pi-driver-ds",
				Driver: "pi-driver-0 (uid d0), Running, container spark-kubernetes-driver running since 2026-11-30T10:00:05Z",
				Node:   "n1: Ready", MaxRestarts: 3,
			},
		},
		{
			name: "recovered: the new incarnation, and each Recovered Event of this placeholder counted",
			snap: func() *Snapshot {
				return &Snapshot{Placeholder: placeholder(), Names: names, StatefulSet: statefulSet(), Driver: driverPod("d1", "n2"), Node: readyNode("n2"),
					Events: []corev1.Event{
						event("Pod", "pi-driver", "p-uid", ReasonRecovered, ControllerName, at(90)),
						legacyEvent("Pod", "pi-driver", "p-uid", ReasonRecovered, ControllerName, "", at(300), 2),
						event("Pod", "pi-driver", "an-earlier-pod-of-that-name", ReasonRecovered, ControllerName, at(10)),
						event("Pod", "pi-driver-0", "d0", ReasonRecovered, "someone", at(10)),
						event("Pod", "pi-driver", "p-uid", "NodeLost", ControllerName, at(70)),
					}}
			},
			want: Status{
				Outcome: "Running", StatefulSet: "pi-driver", Service: "pi-driver-ds",
				Driver: "pi-driver-0 (uid d1), Running, container spark-kubernetes-driver running since 2026-11-30T10:00:05Z",
				Node:   "n2: Ready", MaxRestarts: 3, Recoveries: 3,
			},
		},
		{
			name: "waiting on a dead node: Terminating, the node's state and taints, the open loss record",
			snap: func() *Snapshot {
				p := placeholder()
				p.Annotations = map[string]string{contract.AnnotationDriverLost: `{"pod":"d0","since":"2026-11-30T10:01:00Z","cause":"node-unreachable"}`}
				p.Status.Message += "; node n1 has not been Ready since 2026-11-30T10:01:00Z; the driver pod is kept until the node is confirmed down"
				d := driverPod("d0", "n1")
				d.DeletionTimestamp = ptrTime(at(360))
				return &Snapshot{Placeholder: p, Names: names, StatefulSet: statefulSet(), Driver: d, Node: deadNode("n1")}
			},
			want: Status{
				Outcome: "Running", StatefulSet: "pi-driver", Service: "pi-driver-ds",
				Message:     "driverset: the driver runs in pod jobs/pi-driver-0 on node n1; node n1 has not been Ready since 2026-11-30T10:01:00Z; the driver pod is kept until the node is confirmed down",
				Driver:      "pi-driver-0 (uid d0), Running, Terminating since 2026-11-30T10:06:00Z, container spark-kubernetes-driver running since 2026-11-30T10:00:05Z",
				Node:        "n1: not Ready (Unknown) since 2026-11-30T10:01:00Z, tainted node.kubernetes.io/unreachable:NoExecute",
				MaxRestarts: 3,
				Lost:        "driver pod uid d0 lost since 2026-11-30T10:01:00Z (recovery path: node-unreachable)",
			},
		},
		{
			name: "node deleted under the driver",
			snap: func() *Snapshot {
				return &Snapshot{Placeholder: placeholder(), Names: names, StatefulSet: statefulSet(), Driver: driverPod("d0", "n1"), NodeMissing: true}
			},
			want: Status{
				Outcome: "Running", StatefulSet: "pi-driver", Service: "pi-driver-ds",
				Driver: "pi-driver-0 (uid d0), Running, container spark-kubernetes-driver running since 2026-11-30T10:00:05Z",
				Node:   "n1: deleted (the Node object does not exist)", MaxRestarts: 3,
			},
		},
		{
			name: "failed after its restarts: the exit code, restarts of the app's own max",
			snap: func() *Snapshot {
				p := placeholder()
				p.Annotations = map[string]string{contract.AnnotationRestarts: "2", contract.AnnotationMaxRestarts: "2"}
				p.Status.Phase = corev1.PodFailed
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: contract.DriverContainerName,
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}}}
				return &Snapshot{Placeholder: p, Names: names, StatefulSet: statefulSet()}
			},
			want: Status{
				Outcome: "Failed: the driver exited with code 137", StatefulSet: "pi-driver", Service: "pi-driver-ds",
				Restarts: 2, TotalRestarts: 2, MaxRestarts: 2,
			},
		},
		{
			name: "restarted after healthy runs: this run's restarts, all of them, the app's window",
			snap: func() *Snapshot {
				p := placeholder()
				p.Annotations = map[string]string{contract.AnnotationRestarts: "1", contract.AnnotationRestartsTotal: "5",
					contract.AnnotationRestartWindow: "6h"}
				p.Status.Phase = corev1.PodRunning
				return &Snapshot{Placeholder: p, Names: names, StatefulSet: statefulSet()}
			},
			want: Status{
				Outcome: "Running", StatefulSet: "pi-driver", Service: "pi-driver-ds",
				Restarts: 1, TotalRestarts: 5, MaxRestarts: 3, RestartWindow: 6 * time.Hour,
			},
		},
		{
			name: "restarted by an older driverset: its restarts are all of them; window 0 never forgets",
			snap: func() *Snapshot {
				p := placeholder()
				p.Annotations = map[string]string{contract.AnnotationRestarts: "2", contract.AnnotationRestartWindow: "0"}
				p.Status.Phase = corev1.PodRunning
				return &Snapshot{Placeholder: p, Names: names, StatefulSet: statefulSet()}
			},
			want: Status{
				Outcome: "Running", StatefulSet: "pi-driver", Service: "pi-driver-ds",
				Restarts: 2, TotalRestarts: 2, MaxRestarts: 3, RestartWindow: 0,
			},
		},
		{
			name: "just admitted: no StatefulSet, no driver pod",
			snap: func() *Snapshot {
				p := placeholder()
				p.Status = corev1.PodStatus{}
				return &Snapshot{Placeholder: p, Names: names}
			},
			want: Status{Outcome: "Pending", MaxRestarts: 3},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.snap()
			tc.want.Namespace, tc.want.Placeholder, tc.want.AppID = "jobs", "pi-driver", "spark-123"
			tc.want.Phase = s.Placeholder.Status.Phase
			if tc.want.Message == "" {
				tc.want.Message = s.Placeholder.Status.Message
			}
			if _, set := s.Placeholder.Annotations[contract.AnnotationRestartWindow]; !set && tc.want.RestartWindow == 0 {
				tc.want.RestartWindow = contract.DefaultRestartWindow
			}
			if got := StatusOf(s); got != tc.want {
				t.Errorf("StatusOf:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func ptrTime(t metav1.Time) *metav1.Time { return &t }

func TestStatusOfUnreadableLossRecord(t *testing.T) {
	p := placeholder()
	p.Annotations = map[string]string{contract.AnnotationDriverLost: "{"}
	if got := StatusOf(&Snapshot{Placeholder: p}).Lost; !strings.Contains(got, "unreadable") {
		t.Errorf("Lost = %q, want it to say the record is unreadable", got)
	}
}

// Every field reaches the printed report, and an absent one says so.
func TestWriteStatus(t *testing.T) {
	var b bytes.Buffer
	st := StatusOf(&Snapshot{Placeholder: placeholder(), Names: contract.NamesFor("pi-driver"), StatefulSet: statefulSet(),
		Driver: driverPod("d0", "n1"), Node: readyNode("n1")})
	if err := WriteStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Driver:       jobs/pi-driver (the pod spark-submit made",
		"App id:       spark-123", "Outcome:      Running", "Message:      driverset: the driver runs in pod jobs/pi-driver-0",
		"StatefulSet:  pi-driver, headless Service pi-driver-ds", "Driver pod:   pi-driver-0 (uid d0)", "Node:         n1: Ready",
		"Restarts:     0 of 3 in this run of failures (after the driver process failed; 0 in all; forgotten after a run of 1h)", "Recoveries:   0", "Lost driver:  (none)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status output lacks %q:\n%s", want, b.String())
		}
	}
}

// The app id the current incarnation runs with is its own (wrap's --spark-app-id and the pod's
// UID), read from the command its driver container runs; a driver pod without it runs as the
// submitted id, and shows none.
func TestStatusShowsTheIncarnationsOwnAppID(t *testing.T) {
	d := driverPod("3f2a9c1e-0b1c-4d2e-9f30-112233445566", "n1")
	d.Spec.Containers[1].Command = []string{convert.BinaryPath, "wrap", "--spark-app-id", "spark-123",
		"--incarnation", "$(DRIVERSET_POD_UID)", "--", "/opt/entrypoint.sh"}
	st := StatusOf(&Snapshot{Placeholder: placeholder(), Names: contract.NamesFor("pi-driver"), StatefulSet: statefulSet(), Driver: d})
	if st.RunsAs != "spark-123-3f2a9c1e" {
		t.Errorf("RunsAs = %q, want spark-123-3f2a9c1e", st.RunsAs)
	}
	var b bytes.Buffer
	if err := WriteStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	if want := "App id:       spark-123 (this incarnation runs as spark-123-3f2a9c1e)"; !strings.Contains(b.String(), want) {
		t.Errorf("status lacks %q:\n%s", want, b.String())
	}
	if got := StatusOf(&Snapshot{Placeholder: placeholder(), Driver: driverPod("d0", "n1")}).RunsAs; got != "" {
		t.Errorf("RunsAs = %q for a driver pod without an app id of its own", got)
	}
}
