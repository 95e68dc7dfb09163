package convert

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/driverset/driverset/contract"
)

// TestServiceObject: H is headless, resolves before the driver is Ready, selects only the driver
// pod, is owned by P and survives Spark's clean stop (no spark-app-selector label).
func TestServiceObject(t *testing.T) {
	p := persisted(driverPod())
	h, err := Service(p)
	if err != nil {
		t.Fatal(err)
	}
	n := contract.NamesFor(p.Name)
	yes := true
	checks := []struct {
		what      string
		got, want any
	}{
		{"name", h.Name, n.Service},
		{"namespace", h.Namespace, p.Namespace},
		{"labels", h.Labels, map[string]string{contract.LabelDriver: n.StatefulSet}},
		{"owner", h.OwnerReferences, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: &yes, BlockOwnerDeletion: &yes}}},
		{"clusterIP", h.Spec.ClusterIP, corev1.ClusterIPNone},
		{"publishNotReadyAddresses", h.Spec.PublishNotReadyAddresses, true},
		{"selector", h.Spec.Selector, map[string]string{contract.LabelDriver: n.StatefulSet, contract.LabelSparkRole: contract.RoleDriver}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
}

func TestServicePorts(t *testing.T) {
	tcp := func(name string, port int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(port)}
	}
	cases := []struct {
		name  string
		ports []corev1.ContainerPort
		want  []corev1.ServicePort
	}{
		{name: "no ports: spark's defaults", want: []corev1.ServicePort{tcp("driver-rpc-port", 7078), tcp("blockmanager", 7079), tcp("spark-ui", 4040)}},
		{name: "the driver's own ports", ports: []corev1.ContainerPort{
			{Name: "driver-rpc-port", ContainerPort: 17078, Protocol: corev1.ProtocolTCP},
			{Name: "spark-ui", ContainerPort: 14040},
		}, want: []corev1.ServicePort{tcp("driver-rpc-port", 17078), tcp("spark-ui", 14040)}},
		{name: "unnamed ports are named, duplicates kept once", ports: []corev1.ContainerPort{
			{ContainerPort: 7078}, {ContainerPort: 7078, Protocol: corev1.ProtocolTCP}, {ContainerPort: 8125, Protocol: corev1.ProtocolUDP},
		}, want: []corev1.ServicePort{tcp("port-7078", 7078),
			{Name: "port-8125-udp", Protocol: corev1.ProtocolUDP, Port: 8125, TargetPort: intstr.FromInt32(8125)}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := driverPod()
			pod.Spec.Containers[0].Ports = tc.ports
			h, err := Service(persisted(pod))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(h.Spec.Ports, tc.want) {
				t.Errorf("ports %+v, want %+v", h.Spec.Ports, tc.want)
			}
		})
	}
}
