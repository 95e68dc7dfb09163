package controller

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// A tenant can put driverset's labels on any pod, StatefulSet, Service or Lease it may create, as
// freely as any other label, and such an object is in driverset's caches: what driverset keeps of
// one must not grow with what the object carries, or a tenant's objects of 1 MiB each would grow
// every replica's memory until all of them pass their limit together (issues 11 and 35). So the
// transforms keep, of every cached object's metadata, only the labels and annotations driverset
// reads (ours), of its spec only the fields read, and an object that is still larger than any
// driverset makes (cacheBudget) is kept as its identity and driverset's labels alone (stubMeta).
// This file is the one place that says what is kept of metadata; caches.go says it of each spec.

// cacheBudget is the most a cached object may keep, counted in the bytes of its strings
// (metaSize, keptSize), status aside: a placeholder, an S-0 or an executor, as driverset and Spark
// make them, keeps a few KiB at most, a StatefulSet or a Service driverset makes far less. An
// object over it was shaped by hand to be large, and is not one driverset runs.
const cacheBudget = 64 << 10

// ourLabels are the labels driverset reads from a cached object, or selects cached objects by.
var ourLabels = []string{ //nolint:gochecknoglobals // a constant list
	contract.LabelDriver, contract.LabelPlaceholder, contract.LabelResilient,
	contract.LabelSparkRole, contract.LabelSparkAppSelector, contract.LabelHeartbeat,
}

// ourAnnotations is the prefix of every annotation driverset reads from a cached object (contract's,
// and seal.Annotation): kept by prefix, so that an annotation added to the contract is kept without
// a second list to update. A tenant may write such keys too; bounded caps what they can weigh.
const ourAnnotations = "driverset.dev/"

// keepOurs cuts m's labels and annotations to driverset's own (and Spark's it selects by). Safe
// for writes: driverset changes a cached object only by a merge patch of the difference (a pod's
// annotations, a StatefulSet's replicas), in which a map carries the keys that changed and no
// others, so the keys left out here are never written back.
func keepOurs(m *metav1.ObjectMeta) {
	m.Labels = only(m.Labels, ourLabels)
	var kept map[string]string
	for k, v := range m.Annotations {
		if strings.HasPrefix(k, ourAnnotations) {
			if kept == nil {
				kept = map[string]string{}
			}
			kept[k] = v
		}
	}
	m.Annotations = kept
}

func only(m map[string]string, keys []string) map[string]string {
	var kept map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if kept == nil {
				kept = make(map[string]string, len(keys))
			}
			kept[k] = v
		}
	}
	return kept
}

// bounded is p when what it keeps is within cacheBudget, else its stub: stubMeta, with no spec,
// status or annotations. Every reader then finds nothing of driverset's in it: a placeholder
// without a seal (refused with that reason), a driver pod on no node, an executor controlled by no
// driver.
func bounded(p *corev1.Pod) *corev1.Pod {
	if keptSize(p) <= cacheBudget {
		return p
	}
	return &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: stubMeta(&p.ObjectMeta)}
}

// boundedMeta cuts m to stubMeta when it keeps more than cacheBudget: for a StatefulSet or a
// Service, whose kept spec has no string a tenant could make long. Such a stub is controlled by
// nothing: driverset takes it for another owner's (its placeholder waits, NameTaken), and the
// orphan reconciler reads it live before it scales anything.
func boundedMeta(m *metav1.ObjectMeta) {
	if metaSize(m) > cacheBudget {
		*m = stubMeta(m)
	}
}

// stubMeta is what a stub keeps of m: its identity and version, its deletion, and driverset's
// labels (keepOurs has cut them), whose keys and values the apiserver bounds (317 and 63 bytes).
func stubMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Generation: m.Generation,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
		DeletionGracePeriodSeconds: m.DeletionGracePeriodSeconds, Labels: m.Labels,
	}
}

// keptSize counts the bytes of the strings p keeps besides its status: its metadata's lists and
// maps and what the transforms keep of its spec. Each list a tenant could make long is in it.
func keptSize(p *corev1.Pod) int {
	n := metaSize(&p.ObjectMeta)
	add := func(ss ...string) {
		for _, s := range ss {
			n += len(s)
		}
	}
	for _, t := range p.Spec.Tolerations {
		add(t.Key, string(t.Operator), t.Value, string(t.Effect))
	}
	for _, g := range p.Spec.SchedulingGates {
		add(g.Name)
	}
	for _, c := range p.Spec.Containers {
		add(c.Name)
		add(c.Command...)
		add(c.Args...)
	}
	for _, v := range p.Spec.Volumes {
		add(v.Name)
		if v.PersistentVolumeClaim != nil {
			add(v.PersistentVolumeClaim.ClaimName)
		}
	}
	return n
}

// metaSize counts the bytes of the strings in m's maps and lists, which a tenant can make as long
// as the apiserver's object limit: labels, annotations, finalizers, owner references.
func metaSize(m *metav1.ObjectMeta) int {
	n := 0
	add := func(ss ...string) {
		for _, s := range ss {
			n += len(s)
		}
	}
	for k, v := range m.Labels {
		add(k, v)
	}
	for k, v := range m.Annotations {
		add(k, v)
	}
	add(m.Finalizers...)
	for _, o := range m.OwnerReferences {
		add(o.APIVersion, o.Kind, o.Name, string(o.UID))
	}
	return n
}
