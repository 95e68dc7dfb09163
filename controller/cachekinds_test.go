package controller

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/contract"
)

// cachedKinds are the other kinds a tenant can label as driverset's and so have cached, each with
// its transform and an object as driverset (or wrap) makes it, controlled by a placeholder.
func cachedKinds() map[string]struct {
	transform func(any) (any, error)
	object    func() client.Object
	ours      map[string]string // the labels that select it
} {
	yes := true
	meta := func(l map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: "app", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 2,
			Labels: l, Annotations: map[string]string{contract.AnnotationAdmittedSettings: `{"driverset.dev/max-restarts":"3"}`},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "app", UID: "p", Controller: &yes}},
		}
	}
	driver := map[string]string{contract.LabelDriver: "app"}
	heartbeat := map[string]string{contract.LabelHeartbeat: "true"}
	return map[string]struct {
		transform func(any) (any, error)
		object    func() client.Object
		ours      map[string]string
	}{
		"StatefulSet": {statefulSetTransform, func() client.Object {
			return &appsv1.StatefulSet{ObjectMeta: meta(map[string]string{contract.LabelDriver: "app"}), Spec: appsv1.StatefulSetSpec{Replicas: new(int32(1))}}
		}, driver},
		"Service": {serviceTransform, func() client.Object {
			return &corev1.Service{ObjectMeta: meta(map[string]string{contract.LabelDriver: "app"}), Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}}
		}, driver},
		"Lease": {leaseTransform, func() client.Object {
			holder := "app-0"
			return &coordinationv1.Lease{ObjectMeta: meta(map[string]string{contract.LabelHeartbeat: "true"}), Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
		}, heartbeat},
	}
}

// What the caches keep of a StatefulSet, a Service or a heartbeat Lease does not grow with what
// the object carries (issue 35): of its metadata only driverset's labels and annotations, of its
// spec only what is read, and of one still larger than any driverset makes, only its identity and
// those labels (a stub, without owner). A Lease keeps no more than its identity and labels: its
// version is all that is read. Each row is one object of each kind through its transform.
func TestCachedKindsAreBounded(t *testing.T) {
	big := strings.Repeat("x", cacheBudget)
	cases := []struct {
		name string
		edit func(o client.Object)
		// annots is what is kept of the annotations; stub whether a StatefulSet or a Service is
		// kept as a stub (a Lease keeps neither annotations nor owners).
		annots map[string]string
		stub   bool
	}{
		{"an object as driverset makes it keeps driverset's marks", func(client.Object) {},
			map[string]string{contract.AnnotationAdmittedSettings: `{"driverset.dev/max-restarts":"3"}`}, false},
		{"the owner's own labels and annotations, however many, are not kept", func(o client.Object) {
			l, a := o.GetLabels(), o.GetAnnotations()
			for i := range 2000 {
				l[fmt.Sprintf("team.example/%d", i)] = "x"
			}
			a["tool.example/notes"] = big
		}, map[string]string{contract.AnnotationAdmittedSettings: `{"driverset.dev/max-restarts":"3"}`}, false},
		{"an annotation of driverset's that is too large makes a stub", func(o client.Object) {
			o.GetAnnotations()[contract.AnnotationAdmittedSettings] = big
		}, nil, true},
		{"many finalizers make a stub", func(o client.Object) {
			var f []string
			for i := range cacheBudget / 16 {
				f = append(f, fmt.Sprintf("f.example/%06d", i))
			}
			o.SetFinalizers(f)
		}, map[string]string{contract.AnnotationAdmittedSettings: `{"driverset.dev/max-restarts":"3"}`}, true},
		{"many owner references make a stub", func(o client.Object) {
			refs := o.GetOwnerReferences()
			for i := range cacheBudget / 8 {
				refs = append(refs, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: fmt.Sprintf("o-%06d", i), UID: "u"})
			}
			o.SetOwnerReferences(refs)
		}, map[string]string{contract.AnnotationAdmittedSettings: `{"driverset.dev/max-restarts":"3"}`}, true},
		{"a large spec or status is not kept", func(o client.Object) {
			switch o := o.(type) {
			case *appsv1.StatefulSet:
				o.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "team.example/x", Operator: metav1.LabelSelectorOpIn, Values: []string{big}},
				}}
				o.Spec.ServiceName = big
				o.Status.Conditions = []appsv1.StatefulSetCondition{{Type: "x", Message: big}}
			case *corev1.Service:
				o.Spec.ExternalIPs = []string{big}
			case *coordinationv1.Lease:
				o.Spec.HolderIdentity = &big
			}
		}, map[string]string{contract.AnnotationAdmittedSettings: `{"driverset.dev/max-restarts":"3"}`}, false},
	}
	for _, tc := range cases {
		for kind, k := range cachedKinds() {
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				in := k.object()
				tc.edit(in)
				out, err := k.transform(in)
				if err != nil {
					t.Fatal(err)
				}
				got := out.(client.Object)
				annots, owned := tc.annots, !tc.stub
				if tc.stub || kind == "Lease" {
					annots, owned = nil, false
				}
				if !reflect.DeepEqual(got.GetLabels(), k.ours) || !reflect.DeepEqual(got.GetAnnotations(), annots) {
					t.Errorf("kept labels %s and annotations %s, want %v and %v", described(got.GetLabels()), described(got.GetAnnotations()), k.ours, annots)
				}
				if kept := metav1.GetControllerOf(got) != nil; kept != owned {
					t.Errorf("the controller reference kept: %v, want %v", kept, owned)
				}
				if got.GetName() != "app" || got.GetNamespace() != "ns" || got.GetUID() != "u" || got.GetResourceVersion() != "7" {
					t.Errorf("lost the object's identity: %s/%s %s at %s", got.GetNamespace(), got.GetName(), got.GetUID(), got.GetResourceVersion())
				}
				// What the cache holds, encoded: a bound on every field at once, whatever keeps it.
				b, err := json.Marshal(got)
				if err != nil {
					t.Fatal(err)
				}
				if len(b) > 2*cacheBudget {
					t.Errorf("kept %d bytes (as JSON), over twice the budget of %d", len(b), cacheBudget)
				}
			})
		}
	}
}

// Every field the controller and the webhooks read from a cached StatefulSet, Service or heartbeat
// Lease is kept, as driverset and wrap make them. The readers: observe, unsealed, namesOf,
// ownStatefulSet, createOrGet, placeholderOfStatefulSet (who controls it), planReplicas, setReplicas and
// scaleToZero (replicas, with the resourceVersion of the optimistic lock), rememberedSettings
// (the admitted settings), driverPodFailure (UID, creation, replicas), the orphan reconciler's
// predicate (the driver label, controller, replicas), statefulSetChanged (generation, labels,
// annotations, owners) and the Service watch (its controller); heartbeatOf and
// Heartbeats.EventHandler read a Lease's name and resourceVersion.
func TestCachedKindsKeepWhatIsRead(t *testing.T) {
	h := newCluster(t, map[string]string{contract.AnnotationMaxRestarts: "3"}, nil)
	h.reconcile()
	sts := h.statefulSet()
	sts.Status = appsv1.StatefulSetStatus{Replicas: 1, ReadyReplicas: 1, ObservedGeneration: 1}
	var svc corev1.Service
	if err := h.c.Get(h.ctx, types.NamespacedName{Namespace: h.p.Namespace, Name: h.names.Service}, &svc); err != nil {
		t.Fatal(err)
	}
	now := metav1.NewMicroTime(t0)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: h.names.DriverPodName() + "-heartbeat", Namespace: h.p.Namespace, ResourceVersion: "42",
			Labels: map[string]string{contract.LabelHeartbeat: "true"}, OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: h.names.DriverPodName(), UID: "d"}}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: new("d"), RenewTime: &now, LeaseDurationSeconds: new(int32(30))},
	}
	type identity struct {
		Namespace, Name, Version string
		UID                      types.UID
	}
	id := func(o client.Object) identity {
		return identity{o.GetNamespace(), o.GetName(), o.GetResourceVersion(), o.GetUID()}
	}
	read := map[string]struct {
		obj  client.Object
		tf   func(any) (any, error)
		read func(o client.Object) any
	}{
		"StatefulSet": {sts, statefulSetTransform, func(o client.Object) any {
			s := o.(*appsv1.StatefulSet)
			return []any{id(s), s.Generation, s.CreationTimestamp, s.DeletionTimestamp, metav1.GetControllerOf(s), *s.Spec.Replicas,
				s.Labels[contract.LabelDriver], rememberedSettings(s)}
		}},
		"Service": {&svc, serviceTransform, func(o client.Object) any {
			return []any{id(o), metav1.GetControllerOf(o), o.GetLabels()[contract.LabelDriver]}
		}},
		"Lease": {lease, leaseTransform, func(o client.Object) any {
			return []any{id(o), o.GetLabels()[contract.LabelHeartbeat]}
		}},
	}
	for kind, k := range read {
		t.Run(kind, func(t *testing.T) {
			want := k.read(k.obj)
			out, err := k.tf(k.obj.DeepCopyObject())
			if err != nil {
				t.Fatal(err)
			}
			if got := k.read(out.(client.Object)); !reflect.DeepEqual(got, want) {
				t.Errorf("read from the cache %v, want %v", got, want)
			}
		})
	}
	if got := rememberedSettings(sts); got[contract.AnnotationMaxRestarts] != "3" {
		t.Fatalf("the StatefulSet remembers %v: the test's StatefulSet is not as driverset makes it", got)
	}
}

// described is m for a message: abbreviated, or only counted when it is long.
func described(m map[string]string) string {
	if len(m) > 4 {
		return fmt.Sprintf("(%d keys)", len(m))
	}
	return fmt.Sprint(abbreviated(m))
}
