package controller

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/convert"
)

// Every StatefulSet of the watched namespaces is in the executor-set cache (Spark's have no label
// to select them by), a tenant's too: what it keeps is a fixed shape whatever the set carries
// (issue 35): its identity, its deletion time and a v1 Pod controller reference, which is all
// convert.ExecutorSetOfApp and the gate read. Each row is one set through the transform.
func TestExecutorSetTransformKeepsAFixedShape(t *testing.T) {
	yes := true
	big := strings.Repeat("x", 1<<20)
	now := metav1.Now()
	spark := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "pi-driver-0", UID: "uid-s0", Controller: &yes}
	set := func(refs ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
		o := convert.ExecutorSetObject()
		o.ObjectMeta = metav1.ObjectMeta{Name: "spark-s-spark-abc-0", Namespace: "jobs", UID: "uid-set", ResourceVersion: "9",
			Generation: 4, DeletionTimestamp: &now, Labels: map[string]string{"l": big}, Annotations: map[string]string{"a": big},
			Finalizers: []string{big}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: big}}, OwnerReferences: refs}
		return o
	}
	identity := metav1.ObjectMeta{Name: "spark-s-spark-abc-0", Namespace: "jobs", UID: "uid-set", ResourceVersion: "9", DeletionTimestamp: &now}
	withRef := identity
	withRef.OwnerReferences = []metav1.OwnerReference{spark}
	for _, tc := range []struct {
		name string
		in   *metav1.PartialObjectMetadata
		want metav1.ObjectMeta
	}{
		{"Spark's set: its driver pod reference kept", set(spark, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: big}), withRef},
		{"no controller: identity alone", set(metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "pi-driver-0", UID: "uid-s0"}), identity},
		{"a controller of another kind: identity alone", set(metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", Controller: &yes}), identity},
		{"a Pod reference with a name no pod has: identity alone", set(metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: big, Controller: &yes}), identity},
	} {
		out, err := executorSetTransform(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*metav1.PartialObjectMetadata)
		if !reflect.DeepEqual(got.ObjectMeta, tc.want) || got.GroupVersionKind() != convert.ExecutorSetObject().GroupVersionKind() {
			t.Errorf("%s: kept %+v (%v), want %+v", tc.name, got.ObjectMeta, got.GroupVersionKind(), tc.want)
		}
	}
}

// A Spark executor StatefulSet's deletion reaches the placeholder of the driver pod that
// controlled it (S-0 → S → P), which its gate may be waiting on; any other StatefulSet reaches none.
func TestExecutorSetDeletionRequeuesItsApp(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.reconcile()
	yes := true
	set := func(name, owner string) *metav1.PartialObjectMetadata {
		o := convert.ExecutorSetObject()
		o.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: h.p.Namespace,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: owner, UID: "uid-lost", Controller: &yes}}}
		return o
	}
	for _, tc := range []struct {
		name string
		set  *metav1.PartialObjectMetadata
		want int
	}{
		{"Spark's set of the app's driver pod", set("spark-s-spark-abc-0", h.names.DriverPodName()), 1},
		{"not named as Spark's sets are", set("web", h.names.DriverPodName()), 0},
		{"controlled by a pod that is no S-0", set("spark-s-spark-abc-0", "tenant-web-7f9c"), 0},
		{"controlled by nothing", convert.ExecutorSetObject(), 0},
	} {
		got := h.r.placeholderOfExecutorSet(h.ctx, tc.set)
		if len(got) != tc.want || tc.want == 1 && got[0].NamespacedName != h.p {
			t.Errorf("%s: requests %v, want %d for %v", tc.name, got, tc.want, h.p)
		}
	}
}
