package inspect

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/driverset/driverset/contract"
)

// The app's StatefulSet S is the one its placeholder controls, whatever its name (issue 34):
// kubectl driverset finds it as the controller does, names only as a guess checked against the
// controller reference, and S-0 is the pod S controls.

// thirdName is S's name as another build gave it (a rollback across a naming change).
const thirdName = "renamed-by-another-build"

// ownedSet is driverset's StatefulSet name (UID uid) in "jobs", controlled by the pod of UID owner.
func ownedSet(name string, uid, owner types.UID) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "jobs", UID: uid,
		Labels:          map[string]string{contract.LabelDriver: name},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "pi-driver", UID: owner, Controller: new(true)}}}}
}

// podOfSet is S-0 of StatefulSet sts (UID stsUID), incarnation uid, on node n1.
func podOfSet(sts string, stsUID types.UID, uid string) *corev1.Pod {
	d := driverPod(uid, "n1")
	d.Name = sts + "-0"
	d.Labels = map[string]string{contract.LabelDriver: sts}
	d.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts, UID: stsUID, Controller: new(true)}}
	return d
}

// world is the cases' cluster: the placeholder pi-driver (UID p-uid) and what each case adds.
type world struct {
	name string
	objs []runtime.Object
	// want: S's name and S-0's incarnation UID ("" for none).
	wantSet, wantDriver string
}

func worlds() []world {
	return []world{
		{"S under this build's name", []runtime.Object{ownedSet("pi-driver", "s-uid", "p-uid"), podOfSet("pi-driver", "s-uid", "d0")},
			"pi-driver", "d0"},
		{"S under a third name (a rollback across a naming change)",
			[]runtime.Object{ownedSet(thirdName, "s3-uid", "p-uid"), podOfSet(thirdName, "s3-uid", "d3")}, thirdName, "d3"},
		{"this build's name is an earlier app's S (same placeholder name, another UID); ours under a third name",
			[]runtime.Object{ownedSet("pi-driver", "s-old", "p-uid-earlier"), podOfSet("pi-driver", "s-old", "d-old"),
				ownedSet(thirdName, "s3-uid", "p-uid"), podOfSet(thirdName, "s3-uid", "d3")}, thirdName, "d3"},
		{"only an earlier app's S under this build's name: none yet",
			[]runtime.Object{ownedSet("pi-driver", "s-old", "p-uid-earlier"), podOfSet("pi-driver", "s-old", "d-old")}, "", ""},
		{"S-0 of S's name is an earlier S's: no driver pod",
			[]runtime.Object{ownedSet(thirdName, "s3-uid", "p-uid"), podOfSet(thirdName, "s3-earlier", "d-old")}, thirdName, ""},
	}
}

func TestFetchFindsTheStatefulSetByItsController(t *testing.T) {
	for _, w := range worlds() {
		t.Run(w.name, func(t *testing.T) {
			s, err := Fetch(context.Background(), fake.NewClientset(append([]runtime.Object{placeholder()}, w.objs...)...), "jobs", "pi-driver")
			if err != nil {
				t.Fatal(err)
			}
			var set, driver string
			if s.StatefulSet != nil {
				set = s.StatefulSet.Name
			}
			if s.Driver != nil {
				driver = string(s.Driver.UID)
			}
			if set != w.wantSet || driver != w.wantDriver {
				t.Errorf("StatefulSet %q, driver pod %q; want %q and %q", set, driver, w.wantSet, w.wantDriver)
			}
			if w.wantSet != "" && s.Names.StatefulSet != w.wantSet {
				t.Errorf("names %+v, want those of %s", s.Names, w.wantSet)
			}
		})
	}
}

func TestRowsFindTheStatefulSetByItsController(t *testing.T) {
	for _, w := range worlds() {
		t.Run(w.name, func(t *testing.T) {
			pods := []corev1.Pod{*placeholder()}
			var sets []appsv1.StatefulSet
			for _, o := range w.objs {
				switch o := o.(type) {
				case *corev1.Pod:
					pods = append(pods, *o)
				case *appsv1.StatefulSet:
					sets = append(sets, *o)
				}
			}
			rows := Rows(Listed{Pods: pods, StatefulSets: sets})
			want := map[string]string{"": ""}[w.wantDriver]
			if w.wantDriver != "" {
				want = w.wantSet + "-0"
			}
			if len(rows) != 1 || rows[0].DriverPod != want {
				t.Errorf("rows %+v, want one with driver pod %q", rows, want)
			}
		})
	}
}

// A tenant who may list pods but not StatefulSets: the list of StatefulSets is refused, and the
// CLI's list finds each driver pod by the names driverset gives, labelled for them.
func TestRowsWithoutStatefulSetsGuessByName(t *testing.T) {
	d := podOfSet("pi-driver", "s-uid", "d0")
	rows := Rows(Listed{Pods: []corev1.Pod{*placeholder(), *d}, StatefulSetsNotVisible: true})
	if len(rows) != 1 || rows[0].DriverPod != "pi-driver-0" {
		t.Errorf("rows %+v, want pi-driver-0 found by name", rows)
	}
}

// Fetch as a tenant who may get StatefulSets by name but not list them: the names' guess stands,
// checked against the controller reference; the refused list is no error.
func TestFetchWhenStatefulSetsMayNotBeListed(t *testing.T) {
	c := fake.NewClientset(placeholder(), ownedSet("pi-driver", "s-uid", "p-uid"), podOfSet("pi-driver", "s-uid", "d0"))
	c.PrependReactor("list", "statefulsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "", errors.New("RBAC: tenant"))
	})
	s, err := Fetch(context.Background(), c, "jobs", "pi-driver")
	if err != nil || s.StatefulSet == nil || s.Driver == nil {
		t.Fatalf("Fetch: %v, %+v", err, s)
	}
}
