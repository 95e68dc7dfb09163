package harness

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/driverset/driverset/contract"
)

func driverPod(name, app, node string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid-0000"),
			Labels: map[string]string{contract.LabelSparkRole: contract.RoleDriver, contract.LabelSparkAppSelector: app}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: phase},
	}
}

// The monitor flags two bound, unfinished driver pods of one app, and nothing else.
func TestMonitorFlagsTwoBoundDriversOfOneApp(t *testing.T) {
	cases := []struct {
		name string
		pods []*corev1.Pod
		want int
	}{
		{"one driver", []*corev1.Pod{driverPod("a-0", "app-a", "n1", corev1.PodRunning)}, 0},
		{"placeholder and driver", []*corev1.Pod{driverPod("a", "app-a", "", corev1.PodRunning), driverPod("a-0", "app-a", "n1", corev1.PodRunning)}, 0},
		{"two apps", []*corev1.Pod{driverPod("a-0", "app-a", "n1", corev1.PodRunning), driverPod("b-0", "app-b", "n2", corev1.PodRunning)}, 0},
		{"finished and new", []*corev1.Pod{driverPod("old", "app-a", "n1", corev1.PodFailed), driverPod("new", "app-a", "n2", corev1.PodRunning)}, 0},
		{"two bound drivers of one app", []*corev1.Pod{driverPod("old", "app-a", "n1", corev1.PodRunning), driverPod("new", "app-a", "n2", corev1.PodPending)}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset()
			m, err := StartMonitor(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Stop()
			for _, p := range tc.pods {
				if _, err := c.CoreV1().Pods("ns").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.Now().Add(2 * time.Second)
			for len(m.Violations("ns")) < tc.want && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond) // let any unexpected event arrive
			if got := len(m.Violations("ns")); got != tc.want {
				t.Errorf("violations = %v, want %d", m.Violations("ns"), tc.want)
			}
		})
	}
}
