package inspect

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
)

// t0 is when the fixtures' app was submitted.
var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func at(s int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(s) * time.Second)) }

// placeholder is a converted driver pod as the controller leaves it while the driver runs.
func placeholder() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "pi-driver", Namespace: "jobs", UID: "p-uid",
			Labels: map[string]string{contract.LabelPlaceholder: "true", contract.LabelSparkAppSelector: "spark-123"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: contract.DriverContainerName, Args: []string{"driver"}}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, Message: "driverset: the driver runs in pod jobs/pi-driver-0 on node n1",
		},
	}
}

// statefulSet is the placeholder's S, controlled by it.
func statefulSet() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "pi-driver", Namespace: "jobs", UID: "s-uid",
		Labels:          map[string]string{contract.LabelDriver: "pi-driver"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "pi-driver", UID: "p-uid", Controller: new(true)}}}}
}

// driverPod is incarnation uid of the driver (S-0 of statefulSet), running on node.
func driverPod(uid, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-driver-0", Namespace: "jobs", UID: types.UID(uid),
			Labels:          map[string]string{contract.LabelDriver: "pi-driver"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "pi-driver", UID: "s-uid", Controller: new(true)}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{
			{Name: "wrap-sidecar"}, {Name: contract.DriverContainerName},
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "wrap-sidecar", RestartCount: 7, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}},
			{Name: contract.DriverContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(5)}}},
		}},
	}
}

func readyNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

func deadNode(name string) *corev1.Node {
	n := readyNode(name)
	n.Status.Conditions[0].Status = corev1.ConditionUnknown
	n.Status.Conditions[0].LastTransitionTime = at(60)
	n.Spec.Taints = []corev1.Taint{
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute},
		{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule},
	}
	return n
}

// event is an Event as the new Events API shows through core/v1 (eventTime, series).
func event(kind, name, uid, reason, from string, when metav1.Time) corev1.Event {
	return corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name + "." + reason, Namespace: "jobs"},
		InvolvedObject:      corev1.ObjectReference{Kind: kind, Name: name, Namespace: "jobs", UID: types.UID(uid)},
		Reason:              reason,
		Type:                corev1.EventTypeNormal,
		Message:             reason + " happened",
		ReportingController: from,
		EventTime:           metav1.NewMicroTime(when.Time),
	}
}

// legacyEvent is an Event of the core/v1 API (firstTimestamp, count, source).
func legacyEvent(kind, name, uid, reason, component, host string, first metav1.Time, count int32) corev1.Event {
	return corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name + "." + reason, Namespace: "jobs"},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Name: name, Namespace: "jobs", UID: types.UID(uid)},
		Reason:         reason,
		Type:           corev1.EventTypeNormal,
		Message:        reason + " happened",
		Source:         corev1.EventSource{Component: component, Host: host},
		FirstTimestamp: first,
		LastTimestamp:  first,
		Count:          count,
	}
}
