//go:build testbed

package e2e

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// Issue 35: the policy driverset-guard-creates admits from driverset's ServiceAccount only a
// driver's shape, but it cannot read the owner pod. With a stolen token one could still create a
// driver-shaped StatefulSet owned by any pod whose name is free, or by a real placeholder with
// another image, ServiceAccount or volume, for the StatefulSet controller to run. The webhook entry
// creates.driverset.dev reads the owner and refuses any StatefulSet or Service that is not exactly
// what driverset builds from a sealed placeholder. Every create here is made as driverset's
// ServiceAccount against the test bed's apiserver, as a server-side dry run.
func TestDriversetTokenCreatesOnlyWhatItBuilds(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	r := startApp(t, app(ns, "built"), 0)
	ds := asDriverset(t)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

	// A tenant's own pod, and one labelled as a placeholder without driverset's webhook having
	// made it (that webhook only sees Spark driver pods): no seal.
	plain := createPod(t, ns, "web", nil)
	forged := createPod(t, ns, "forged", map[string]string{contract.LabelPlaceholder: "true"})

	fresh, freshSvc := madeByDriverset(t, ns, r.names)
	// ownedBy moves a driver's StatefulSet or Service onto pod p: named for it, selecting its
	// would-be driver pod, owned by it. The shape driverset-guard-creates admits.
	yes := true
	reown := func(m *metav1.ObjectMeta, p *corev1.Pod) {
		m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: &yes, BlockOwnerDeletion: &yes}}
		m.Labels = map[string]string{contract.LabelDriver: p.Name}
	}
	stsFor := func(p *corev1.Pod) *appsv1.StatefulSet {
		s := fresh()
		reown(&s.ObjectMeta, p)
		n := contract.NamesFor(p.Name)
		s.Name, s.Spec.ServiceName = n.StatefulSet, n.Service
		s.Spec.Selector.MatchLabels[contract.LabelDriver] = n.StatefulSet
		s.Spec.Template.Labels[contract.LabelDriver] = n.StatefulSet
		return s
	}
	svcFor := func(p *corev1.Pod) *corev1.Service {
		s := freshSvc()
		reown(&s.ObjectMeta, p)
		n := contract.NamesFor(p.Name)
		s.Name = n.Service
		s.Spec.Selector[contract.LabelDriver] = n.StatefulSet
		return s
	}
	createSts := func(s *appsv1.StatefulSet) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := ds.AppsV1().StatefulSets(ns).Create(ctx, s, dry)
			return err
		}
	}
	createSvc := func(s *corev1.Service) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := ds.CoreV1().Services(ns).Create(ctx, s, dry)
			return err
		}
	}
	// changed is the app's own StatefulSet, for its real placeholder, with one change.
	changed := func(change func(*corev1.PodSpec)) func(context.Context) error {
		s := fresh()
		change(&s.Spec.Template.Spec)
		return createSts(s)
	}
	driver := func(spec *corev1.PodSpec) *corev1.Container {
		for i := range spec.Containers {
			if spec.Containers[i].Name == contract.DriverContainerName {
				return &spec.Containers[i]
			}
		}
		t.Fatalf("no container %s in %v", contract.DriverContainerName, spec.Containers)
		return nil
	}
	refused := []struct {
		name string
		do   func(context.Context) error
	}{
		{"a driver's StatefulSet for a tenant's pod", createSts(stsFor(plain))},
		{"a driver's Service for a tenant's pod", createSvc(svcFor(plain))},
		{"a driver's StatefulSet for a pod labelled as a placeholder, unsealed", createSts(stsFor(forged))},
		{"the placeholder's StatefulSet with another image", changed(func(s *corev1.PodSpec) {
			driver(s).Image = "attacker/miner"
		})},
		{"the placeholder's StatefulSet with another init image", changed(func(s *corev1.PodSpec) {
			s.InitContainers[0].Image = "attacker/miner"
		})},
		{"the placeholder's StatefulSet as another ServiceAccount", changed(func(s *corev1.PodSpec) {
			s.ServiceAccountName = "namespace-admin"
		})},
		{"the placeholder's StatefulSet with a hostPath volume", changed(func(s *corev1.PodSpec) {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
			c := driver(s)
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "host", MountPath: "/host"})
		})},
		{"the placeholder's StatefulSet privileged", changed(func(s *corev1.PodSpec) {
			driver(s).SecurityContext = &corev1.SecurityContext{Privileged: &yes}
		})},
		{"the placeholder's StatefulSet on the host's network", changed(func(s *corev1.PodSpec) {
			s.HostNetwork, s.HostPID = true, true
		})},
		{"the placeholder's StatefulSet on a node of the attacker's choice", changed(func(s *corev1.PodSpec) {
			s.NodeName = "node-1"
		})},
		{"the placeholder's StatefulSet tolerating every taint", changed(func(s *corev1.PodSpec) {
			s.Tolerations = append(s.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
		})},
		{"the placeholder's StatefulSet with a GPU", changed(func(s *corev1.PodSpec) {
			c := driver(s)
			c.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
			c.Resources.Requests = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
		})},
		{"the placeholder's StatefulSet owned by another UID", func(ctx context.Context) error {
			s := fresh()
			s.OwnerReferences[0].UID = plain.UID
			return createSts(s)(ctx)
		}},
		{"the placeholder's Service with a port of the attacker's", func(ctx context.Context) error {
			s := freshSvc()
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "ssh", Port: 22})
			return createSvc(s)(ctx)
		}},
	}
	for _, tc := range refused {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			err := tc.do(ctx)
			switch {
			case err == nil:
				t.Fatal("accepted")
			case apierrors.IsAlreadyExists(err):
				t.Fatal("accepted by admission (then found the name taken)")
			case !strings.Contains(err.Error(), "creates.driverset.dev"):
				t.Fatalf("refused, but not by driverset's creates webhook: %v", err)
			}
			t.Logf("%v", err)
		})
	}
	// driverset's own objects for the app, exactly as it built them, still pass admission (and are
	// then refused by storage: the names are taken). The whole e2e suite makes them for real.
	allowed := []struct {
		name string
		do   func(context.Context) error
	}{
		{"the placeholder's StatefulSet as driverset builds it", alreadyMade(createSts(fresh()))},
		{"the placeholder's StatefulSet with fewer replicas", func(ctx context.Context) error {
			s := fresh()
			s.Spec.Replicas = new(int32(0))
			return alreadyMade(createSts(s))(ctx)
		}},
		{"the placeholder's Service as driverset builds it", alreadyMade(createSvc(freshSvc()))},
	}
	for _, tc := range allowed {
		t.Run("allowed: "+tc.name, func(t *testing.T) {
			if err := tc.do(ctx); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

// madeByDriverset returns copies of the StatefulSet and Service driverset made for the app of
// names in ns, as a create would send them again: without what the apiserver set on them.
func madeByDriverset(t *testing.T, ns string, names contract.Names) (func() *appsv1.StatefulSet, func() *corev1.Service) {
	t.Helper()
	ctx := context.Background()
	sts, err := kube().AppsV1().StatefulSets(ns).Get(ctx, names.StatefulSet, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := kube().CoreV1().Services(ns).Get(ctx, names.Service, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return func() *appsv1.StatefulSet {
			s := sts.DeepCopy()
			s.ObjectMeta = metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: s.Labels, Annotations: s.Annotations, OwnerReferences: s.OwnerReferences}
			s.Status = appsv1.StatefulSetStatus{}
			return s
		}, func() *corev1.Service {
			s := svc.DeepCopy()
			s.ObjectMeta = metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: s.Labels, OwnerReferences: s.OwnerReferences}
			s.Spec.ClusterIPs, s.Status = nil, corev1.ServiceStatus{}
			return s
		}
}

// createPod creates a plain pod named name with labels, held by a gate so no node runs it.
func createPod(t *testing.T, ns, name string, labels map[string]string) *corev1.Pod {
	t.Helper()
	p, err := kube().CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			Containers:      []corev1.Container{{Name: "web", Image: "nginx"}},
			SchedulingGates: []corev1.PodSchedulingGate{{Name: "example.com/hold"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
