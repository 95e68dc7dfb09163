package controller

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// An app admitted by a driverset whose name suffix had 32 bits keeps its StatefulSet under that
// name after the upgrade: no second StatefulSet (a second driver) under the 64-bit name. A
// StatefulSet of the legacy name that p does not control changes nothing.
func TestOldNameAppKeepsItsStatefulSet(t *testing.T) {
	for _, tc := range []struct {
		name       string
		controlled bool
		want       func(string) contract.Names
	}{
		{"legacy StatefulSet controlled by the placeholder", true, contract.LegacyNamesFor},
		{"legacy name taken by a StatefulSet of someone else", false, contract.NamesFor},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p := sparkDriverPod(t, nil)
			p.Name = strings.Repeat("long-app-name-", 5) + "driver"
			if err := convert.ToPlaceholder(p); err != nil {
				t.Fatal(err)
			}
			if err := testSeal().Sign(p); err != nil {
				t.Fatal(err)
			}
			p.CreationTimestamp = metav1.NewTime(t0)
			p.UID = "0b7e1d52-6c1a-4f3e-9d8b-2a4c6e8f0a1b"
			legacy := contract.LegacyNamesFor(p.Name)
			if legacy == contract.NamesFor(p.Name) {
				t.Fatal("the fixture's name needs no suffix")
			}
			old, err := convert.StatefulSet(p, convert.Options{Image: "registry.example/driverset:old", Names: legacy})
			if err != nil {
				t.Fatal(err)
			}
			if !tc.controlled {
				old.OwnerReferences = nil
			}
			c := withEventFields(fake.NewClientBuilder()).WithObjects(p, old).WithStatusSubresource(&corev1.Pod{}).Build()
			r := &Placeholder{Client: c, APIReader: c, Events: events.NewFakeRecorder(100),
				Convert: convert.Options{Image: "registry.example/driverset:new"}, Budget: Budget{Backoff: 1, MaxBackoff: 1}, Seal: testSeal()}
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
				t.Fatal(err)
			}
			var list appsv1.StatefulSetList
			if err := c.List(ctx, &list, client.InNamespace(p.Namespace)); err != nil {
				t.Fatal(err)
			}
			var ours []string
			for _, s := range list.Items {
				if metav1.IsControlledBy(&s, p) {
					ours = append(ours, s.Name)
				}
			}
			if want := tc.want(p.Name).StatefulSet; len(ours) != 1 || ours[0] != want {
				t.Errorf("the placeholder controls StatefulSets %v, want only %s", ours, want)
			}
		})
	}
}
