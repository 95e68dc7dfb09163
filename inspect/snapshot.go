// Package inspect is the logic of `kubectl driverset`: it fetches what driverset made for one
// Spark driver (the placeholder spark-submit watches, its StatefulSet, the StatefulSet's pod and
// that pod's node, and their Events) into a Snapshot, and turns a Snapshot into the reports that
// `status`, `why` and `logs` print. The report builders are pure functions of a Snapshot.
package inspect

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// Snapshot is what the cluster holds about one driver, read once.
type Snapshot struct {
	// Placeholder is the driver pod spark-submit made and watches.
	Placeholder *corev1.Pod
	// Names are the names of what driverset made for it; StatefulSet is nil until it exists.
	Names       contract.Names
	StatefulSet *appsv1.StatefulSet
	// Driver is the StatefulSet's pod (the current incarnation), nil while there is none.
	Driver *corev1.Pod
	// Node is Driver's node; NodeMissing is true when Driver is bound to a node that does not exist.
	Node        *corev1.Node
	NodeMissing bool
	// NodeNotVisible is true when the apiserver refused to show Driver's node (Forbidden: a
	// tenant with namespaced rights only may not read Nodes, which are cluster-scoped).
	NodeNotVisible bool
	// Events of the placeholder, the StatefulSet and every incarnation of its pod (they share its name).
	Events []corev1.Event
	// EventsNotVisible is true when the apiserver refused to list the namespace's Events (Forbidden).
	EventsNotVisible bool
	// Properties is the driver's properties file (the one its command names), as the ConfigMap
	// mounted there holds it: Spark's settings that decide the id the driver runs with
	// (wrap.Options.RunsAs). Nil when there is none; PropertiesNotVisible when the apiserver
	// refused to show the ConfigMap (Forbidden).
	Properties           []byte
	PropertiesNotVisible bool
}

// Fetch reads the Snapshot of the placeholder called name in namespace ns.
func Fetch(ctx context.Context, c kubernetes.Interface, ns, name string) (*Snapshot, error) {
	p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if p.Labels[contract.LabelPlaceholder] != "true" {
		return nil, notPlaceholder(p)
	}
	s := &Snapshot{Placeholder: p}
	if s.Names, s.StatefulSet, err = statefulSetOf(ctx, c, p); err != nil {
		return nil, err
	}
	if s.Driver, err = driverOf(ctx, c, s.StatefulSet); err != nil {
		return nil, err
	}
	if s.Driver != nil && s.Driver.Spec.NodeName != "" {
		s.Node, err = getOrNil(c.CoreV1().Nodes().Get(ctx, s.Driver.Spec.NodeName, metav1.GetOptions{}))
		switch {
		case apierrors.IsForbidden(err):
			s.NodeNotVisible = true
		case err != nil:
			return nil, err
		default:
			s.NodeMissing = s.Node == nil
		}
	}
	if s.Driver != nil {
		s.Properties, err = propertiesOf(ctx, c, s.Driver, driverContainer(p))
		switch {
		case apierrors.IsForbidden(err):
			s.PropertiesNotVisible = true
		case err != nil:
			return nil, err
		}
	}
	// The StatefulSet usually has the placeholder's name: ask once per name, keep each Event once.
	seen := sets.New[string]()
	for _, obj := range sets.List(sets.New(p.Name, s.Names.StatefulSet, s.Names.DriverPodName())) {
		list, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", obj).String(),
		})
		if apierrors.IsForbidden(err) {
			s.EventsNotVisible, s.Events = true, nil
			break
		}
		if err != nil {
			return nil, err
		}
		for _, e := range list.Items {
			if !seen.Has(e.Name) {
				seen.Insert(e.Name)
				s.Events = append(s.Events, e)
			}
		}
	}
	return s, nil
}

// statefulSetOf finds p's StatefulSet S as the controller does (controller/names.go): the one p
// controls, whatever its name (convert.StatefulSetOf). The names this build gives p, and the
// legacy ones, are tried first (one Get each, what a tenant may always do) and kept only when p
// controls what they name; then driverset's StatefulSets of the namespace are listed. A tenant
// who may not list them (Forbidden) gets the names' guess alone. With no S, the names are this
// build's and the StatefulSet nil.
func statefulSetOf(ctx context.Context, c kubernetes.Interface, p *corev1.Pod) (contract.Names, *appsv1.StatefulSet, error) {
	current := contract.NamesFor(p.Name)
	for _, n := range contract.CandidateNamesFor(p.Name) {
		sts, err := getOrNil(c.AppsV1().StatefulSets(p.Namespace).Get(ctx, n.StatefulSet, metav1.GetOptions{}))
		if err != nil {
			return contract.Names{}, nil, err
		}
		if sts != nil && metav1.IsControlledBy(sts, p) {
			return n, sts, nil
		}
	}
	list, err := c.AppsV1().StatefulSets(p.Namespace).List(ctx, metav1.ListOptions{LabelSelector: contract.LabelDriver})
	switch {
	case apierrors.IsForbidden(err):
		return current, nil, nil
	case err != nil:
		return contract.Names{}, nil, err
	}
	sets := make([]metav1.Object, 0, len(list.Items))
	for i := range list.Items {
		sets = append(sets, &list.Items[i])
	}
	if s := convert.StatefulSetOf(p, sets); s != nil {
		sts := s.(*appsv1.StatefulSet)
		return contract.NamesOfStatefulSet(sts.Name), sts, nil
	}
	return current, nil, nil
}

// driverOf is S-0, the pod sts controls of the name it gives its pod; nil when there is none (or
// no S): a pod of that name that sts does not control (an earlier S's, a stranger's) is not it.
func driverOf(ctx context.Context, c kubernetes.Interface, sts *appsv1.StatefulSet) (*corev1.Pod, error) {
	if sts == nil {
		return nil, nil
	}
	d, err := getOrNil(c.CoreV1().Pods(sts.Namespace).Get(ctx, contract.NamesOfStatefulSet(sts.Name).DriverPodName(), metav1.GetOptions{}))
	if err != nil || d == nil || !metav1.IsControlledBy(d, sts) {
		return nil, err
	}
	return d, nil
}

// getOrNil turns NotFound into nil.
func getOrNil[T any](obj *T, err error) (*T, error) {
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return obj, nil
}

// notPlaceholder explains why p is not a driver that driverset runs, naming the pod to ask about
// when p is one of driverset's own driver pods.
func notPlaceholder(p *corev1.Pod) error {
	if sts := p.Labels[contract.LabelDriver]; sts != "" {
		for _, o := range p.OwnerReferences {
			if o.Kind == "StatefulSet" && o.Name == sts {
				return fmt.Errorf("pod %s/%s is the driver pod of StatefulSet %s; ask about the driver pod spark-submit made (the StatefulSet's owner)", p.Namespace, p.Name, sts)
			}
		}
	}
	return fmt.Errorf("pod %s/%s is not a driver that driverset runs (it has no label %s=true)", p.Namespace, p.Name, contract.LabelPlaceholder)
}
