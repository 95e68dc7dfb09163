package controller

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
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

// Only claims labelled as driverset's are in the executor-set cache (the driver labels the
// executor claims it makes so), but a tenant can label any claim: each is kept as a set is (its
// identity, deletion time and v1 Pod controller reference) and that one label, by which
// convert.ExecutorClaimsOfIncarnation selects it; nothing a tenant writes grows it.
func TestExecutorClaimTransformKeepsAFixedShape(t *testing.T) {
	yes := true
	big := strings.Repeat("x", 1<<20)
	driver := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "pi-driver-0", UID: "uid-s0", Controller: &yes}
	claim := func(labels map[string]string, refs ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
		o := convert.ExecutorClaimObject()
		o.ObjectMeta = metav1.ObjectMeta{Name: "pi-exec-1-pvc-0", Namespace: "jobs", UID: "uid-claim", ResourceVersion: "7",
			Labels: labels, Annotations: map[string]string{"a": big}, Finalizers: []string{"kubernetes.io/pvc-protection", big},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: big}}, OwnerReferences: refs}
		return o
	}
	ours := map[string]string{contract.LabelDriver: "pi-driver"}
	identity := metav1.ObjectMeta{Name: "pi-exec-1-pvc-0", Namespace: "jobs", UID: "uid-claim", ResourceVersion: "7", Labels: ours}
	withRef := identity
	withRef.OwnerReferences = []metav1.OwnerReference{driver}
	for _, tc := range []struct {
		name string
		in   *metav1.PartialObjectMetadata
		want metav1.ObjectMeta
	}{
		{"a driver's executor claim: its driver pod reference and driverset's label kept",
			claim(map[string]string{contract.LabelDriver: "pi-driver", contract.LabelSparkAppSelector: "spark-abc", "l": big}, driver), withRef},
		{"a tenant's labelled claim with no controller: identity and the label alone",
			claim(map[string]string{contract.LabelDriver: "pi-driver", "l": big}, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: big}), identity},
	} {
		out, err := executorClaimTransform(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*metav1.PartialObjectMetadata)
		if !reflect.DeepEqual(got.ObjectMeta, tc.want) || got.GroupVersionKind() != convert.ExecutorClaimObject().GroupVersionKind() {
			t.Errorf("%s: kept %+v (%v), want %+v", tc.name, got.ObjectMeta, got.GroupVersionKind(), tc.want)
		}
	}
}

// An executor claim's deletion reaches the placeholder of the driver pod that controlled it
// (S-0 → S → P), which its gate may be waiting on; a claim of any other pod reaches none.
func TestExecutorClaimDeletionRequeuesItsApp(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.reconcile()
	yes := true
	claim := func(owner string) *metav1.PartialObjectMetadata {
		o := convert.ExecutorClaimObject()
		o.ObjectMeta = metav1.ObjectMeta{Name: "pi-exec-1-pvc-0", Namespace: h.p.Namespace,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: owner, UID: "uid-lost", Controller: &yes}}}
		return o
	}
	for _, tc := range []struct {
		name  string
		claim *metav1.PartialObjectMetadata
		want  int
	}{
		{"a claim of the app's driver pod", claim(h.names.DriverPodName()), 1},
		{"a claim of the placeholder (the driver's own)", claim(h.p.Name), 0},
		{"a claim of a pod that is no S-0", claim("tenant-web-7f9c"), 0},
		{"controlled by nothing", convert.ExecutorClaimObject(), 0},
	} {
		got := h.r.placeholderOfDriverOwned(h.ctx, tc.claim)
		if len(got) != tc.want || tc.want == 1 && got[0].NamespacedName != h.p {
			t.Errorf("%s: requests %v, want %d for %v", tc.name, got, tc.want, h.p)
		}
	}
}
