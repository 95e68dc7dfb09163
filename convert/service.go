package convert

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/driverset/driverset/contract"
)

// sparkDriverPorts are the ports Spark's driver listens on by default (docs/spark-facts.md §2), used when
// the driver container declares none.
func sparkDriverPorts() []corev1.ContainerPort {
	return []corev1.ContainerPort{
		{Name: "driver-rpc-port", ContainerPort: 7078, Protocol: corev1.ProtocolTCP},
		{Name: "blockmanager", ContainerPort: 7079, Protocol: corev1.ProtocolTCP},
		{Name: "spark-ui", ContainerPort: 4040, Protocol: corev1.ProtocolTCP},
	}
}

// Service builds the headless Service H that gives the driver pod <sts>-0 its stable DNS name
// <sts>-0.<H>.<ns>.svc. It publishes not-ready addresses so the name resolves as soon as the pod
// has an IP (executors connect before the driver reports Ready). It does not carry
// spark-app-selector: Spark's clean stop deletes every Service that does.
func Service(p *corev1.Pod) (*corev1.Service, error) {
	return ServiceNamed(p, contract.Names{})
}

// ServiceNamed is Service with the names n (empty: contract.NamesFor(p.Name)), see Options.Names.
func ServiceNamed(p *corev1.Pod, n contract.Names) (*corev1.Service, error) {
	n, err := persistedPlaceholder(p, n)
	if err != nil {
		return nil, err
	}
	ports := p.Spec.Containers[driverContainer(p)].Ports
	if len(ports) == 0 {
		ports = sparkDriverPorts()
	}
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            n.Service,
			Namespace:       p.Namespace,
			Labels:          map[string]string{contract.LabelDriver: n.StatefulSet},
			OwnerReferences: ownedBy(p),
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 driverSelector(n),
			Ports:                    servicePorts(ports),
			PublishNotReadyAddresses: true,
		},
	}, nil
}

// servicePorts maps container ports to Service ports. A Service with several ports needs each one
// named, so an unnamed container port gets "port-<number>"; a port+protocol seen twice is kept once.
func servicePorts(ports []corev1.ContainerPort) []corev1.ServicePort {
	type key struct {
		port     int32
		protocol corev1.Protocol
	}
	seen := map[key]bool{}
	var out []corev1.ServicePort
	for _, cp := range ports {
		protocol := cp.Protocol
		if protocol == "" {
			protocol = corev1.ProtocolTCP
		}
		k := key{cp.ContainerPort, protocol}
		if seen[k] {
			continue
		}
		seen[k] = true
		name := cp.Name
		if name == "" {
			name = fmt.Sprintf("port-%d", cp.ContainerPort)
			if protocol != corev1.ProtocolTCP {
				name += "-" + strings.ToLower(string(protocol))
			}
		}
		out = append(out, corev1.ServicePort{
			Name:       name,
			Protocol:   protocol,
			Port:       cp.ContainerPort,
			TargetPort: intstr.FromInt32(cp.ContainerPort),
		})
	}
	return out
}
