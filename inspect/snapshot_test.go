package inspect

import (
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/driverset/driverset/contract"
)

func TestFetch(t *testing.T) {
	p := placeholder()
	sts := statefulSet()
	d := driverPod("d0", "n1")
	recovered := event("Pod", "pi-driver", "p-uid", ReasonRecovered, ControllerName, at(90))
	created := legacyEvent("StatefulSet", "pi-driver", "s-uid", "SuccessfulCreate", "statefulset-controller", "", at(2), 1)
	c := fake.NewClientset(p, sts, d, &recovered, &created)
	s, err := Fetch(context.Background(), c, "jobs", "pi-driver")
	if err != nil {
		t.Fatal(err)
	}
	if s.StatefulSet == nil || s.Driver == nil || s.Driver.UID != "d0" || s.Node != nil || !s.NodeMissing {
		t.Errorf("snapshot %+v", s)
	}
	// Events are listed per name, and the placeholder, its StatefulSet and (here, with a fake
	// apiserver that ignores field selectors) any list may return the same Event: each is kept once.
	if len(s.Events) != 2 || StatusOf(s).Recoveries != 1 {
		t.Errorf("%d Events, %d recoveries; want 2 and 1", len(s.Events), StatusOf(s).Recoveries)
	}

	if _, err := Fetch(context.Background(), c, "jobs", "pi-driver-0"); err == nil || !strings.Contains(err.Error(), "driver pod of StatefulSet pi-driver") {
		t.Errorf("asking about the StatefulSet's pod: %v", err)
	}
	other := placeholder()
	other.Name, other.Labels = "plain", nil
	if _, err := Fetch(context.Background(), fake.NewClientset(other), "jobs", "plain"); err == nil || !strings.Contains(err.Error(), "not a driver that driverset runs") {
		t.Errorf("asking about a plain pod: %v", err)
	}
}

// A placeholder admitted by an earlier driverset keeps the StatefulSet of its legacy name, as the
// controller does; one under that name that the placeholder does not control is not its.
func TestFetchLegacyName(t *testing.T) {
	long := strings.Repeat("a", 60) + "-driver"
	for _, tc := range []struct {
		name       string
		controlled bool
		want       string
	}{
		{"controlled: the legacy name", true, contract.LegacyNamesFor(long).StatefulSet},
		{"not controlled: the current name", false, contract.NamesFor(long).StatefulSet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := placeholder()
			p.Name = long
			legacy := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: contract.LegacyNamesFor(long).StatefulSet, Namespace: "jobs"}}
			if tc.controlled {
				legacy.OwnerReferences = []metav1.OwnerReference{{Kind: "Pod", Name: long, UID: p.UID, Controller: new(true)}}
			}
			s, err := Fetch(context.Background(), fake.NewClientset([]runtime.Object{p, legacy}...), "jobs", long)
			if err != nil {
				t.Fatal(err)
			}
			if s.Names.StatefulSet != tc.want {
				t.Errorf("StatefulSet %q, want %q", s.Names.StatefulSet, tc.want)
			}
		})
	}
}

// A tenant with namespaced edit may not read Nodes (cluster-scoped) and, under a tighter role,
// Events: Fetch keeps what it could read and says what it could not, instead of failing, and
// status and why say "not visible" rather than "deleted" or "none".
func TestFetchAsATenantWhoMayNotReadNodesOrEvents(t *testing.T) {
	d := driverPod("d0", "n1")
	recovered := event("Pod", "pi-driver", "p-uid", ReasonRecovered, ControllerName, at(90))
	c := fake.NewClientset(placeholder(), statefulSet(), d, &recovered)
	forbid := func(resource string) {
		c.PrependReactor("*", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New("RBAC: tenant"))
		})
	}
	forbid("nodes")
	forbid("events")
	s, err := Fetch(context.Background(), c, "jobs", "pi-driver")
	if err != nil {
		t.Fatalf("Fetch as a tenant: %v", err)
	}
	if s.Driver == nil || s.NodeMissing || !s.NodeNotVisible || !s.EventsNotVisible || len(s.Events) != 0 {
		t.Errorf("snapshot: driver %v, node missing %v, node not visible %v, events not visible %v, %d Events",
			s.Driver != nil, s.NodeMissing, s.NodeNotVisible, s.EventsNotVisible, len(s.Events))
	}
	var status, why strings.Builder
	if err := WriteStatus(&status, StatusOf(s)); err != nil {
		t.Fatal(err)
	}
	if err := WriteWhy(&why, s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Node:         n1: not visible (", "Recoveries:   not visible ("} {
		if !strings.Contains(status.String(), want) {
			t.Errorf("status has no %q:\n%s", want, status.String())
		}
	}
	if !strings.Contains(why.String(), "Events are not visible") {
		t.Errorf("why:\n%s", why.String())
	}
	// Any other error still fails: only Forbidden is "not visible".
	c2 := fake.NewClientset(placeholder(), statefulSet(), d)
	c2.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("apiserver down")
	})
	if _, err := Fetch(context.Background(), c2, "jobs", "pi-driver"); err == nil {
		t.Error("Fetch hid an unavailable apiserver")
	}
}
