package inspect

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	"github.com/driverset/driverset/contract"
)

func TestLogTarget(t *testing.T) {
	custom := placeholder()
	custom.Spec.Containers = []corev1.Container{{Name: "sidecar"}, {Name: "main", Args: []string{"driver"}}}
	customDriver := driverPod("d0", "n1")
	customDriver.Spec.Containers = []corev1.Container{{Name: "sidecar"}, {Name: "main"}}
	waiting := placeholder()
	waiting.Status.Message = "driverset: waiting for the StatefulSet to create the driver pod"
	cases := []struct {
		name                string
		snap                *Snapshot
		pod, container, err string
	}{
		{name: "the current incarnation's driver container, not a sidecar",
			snap: &Snapshot{Placeholder: placeholder(), Driver: driverPod("d1", "n1")}, pod: "pi-driver-0", container: contract.DriverContainerName},
		{name: "a driver container that spark-submit named otherwise (found by its driver argument)",
			snap: &Snapshot{Placeholder: custom, Driver: customDriver}, pod: "pi-driver-0", container: "main"},
		{name: "no driver pod: the placeholder's message says why",
			snap: &Snapshot{Placeholder: waiting}, err: "waiting for the StatefulSet to create the driver pod"},
		{name: "a driver pod without the driver container",
			snap: &Snapshot{Placeholder: custom, Driver: driverPod("d0", "n1")}, err: `no container "main"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod, container, err := LogTarget(tc.snap)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil || pod != tc.pod || container != tc.container {
				t.Errorf("LogTarget = %q, %q, %v; want %q, %q", pod, container, err, tc.pod, tc.container)
			}
		})
	}
}

// The logs flags reach the kubelet's log request as kubectl logs passes them.
func TestLogRequest(t *testing.T) {
	withSidecar := driverPod("d1", "n1")
	withSidecar.Spec.Containers = append(withSidecar.Spec.Containers, corev1.Container{Name: "istio-proxy"})
	s := &Snapshot{Placeholder: placeholder(), Driver: withSidecar}
	for _, tc := range []struct {
		name string
		o    LogOptions
		want corev1.PodLogOptions
		err  string
	}{
		{name: "no flags: all of the driver container", o: LogOptions{Tail: -1}, want: corev1.PodLogOptions{Container: contract.DriverContainerName}},
		{name: "-f --previous --timestamps --tail 5 --since 90s", o: LogOptions{Follow: true, Previous: true, Timestamps: true, Tail: 5, Since: 90 * time.Second},
			want: corev1.PodLogOptions{Container: contract.DriverContainerName, Follow: true, Previous: true, Timestamps: true, TailLines: ptr.To[int64](5), SinceSeconds: ptr.To[int64](90)}},
		{name: "--since 1500ms rounds up to whole seconds", o: LogOptions{Tail: -1, Since: 1500 * time.Millisecond},
			want: corev1.PodLogOptions{Container: contract.DriverContainerName, SinceSeconds: ptr.To[int64](2)}},
		{name: "-c a sidecar", o: LogOptions{Tail: -1, Container: "istio-proxy"}, want: corev1.PodLogOptions{Container: "istio-proxy"}},
		{name: "-c a container the pod does not have", o: LogOptions{Tail: -1, Container: "nope"}, err: `no container "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, got, err := LogRequest(s, tc.o)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil || pod != "pi-driver-0" || !equality.Semantic.DeepEqual(*got, tc.want) {
				t.Errorf("LogRequest = %q, %+v, %v; want pi-driver-0, %+v", pod, got, err, tc.want)
			}
		})
	}
}
