package controller

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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
		// notCached: the informer cache has not seen the legacy StatefulSet yet (a new leader's
		// watch behind the old leader's create).
		notCached bool
		want      func(string) contract.Names
	}{
		{"legacy StatefulSet controlled by the placeholder", true, false, contract.LegacyNamesFor},
		{"legacy name taken by a StatefulSet of someone else", false, false, contract.NamesFor},
		{"legacy StatefulSet not in the cache yet", true, true, contract.LegacyNamesFor},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p, old := legacyApp(t, nil)
			if !tc.controlled {
				old.OwnerReferences = nil
			}
			c := legacyCluster(p, old)
			var cached client.Client = c
			if tc.notCached {
				cached = interceptor.NewClient(c, interceptor.Funcs{
					Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
						if _, ok := obj.(*appsv1.StatefulSet); ok && key.Name == old.Name {
							return apierrors.NewNotFound(appsv1.Resource("statefulsets"), key.Name)
						}
						return cl.Get(ctx, key, obj, opts...)
					},
				})
			}
			r := &Placeholder{Client: cached, APIReader: c, Events: events.NewFakeRecorder(100),
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

// legacyApp is a placeholder whose name needs a suffix, with the StatefulSet an earlier driverset
// made for it under the legacy name; edit, when set, changes the placeholder before it is signed.
func legacyApp(t *testing.T, edit func(*corev1.Pod)) (*corev1.Pod, *appsv1.StatefulSet) {
	t.Helper()
	p := sparkDriverPod(t, nil)
	p.Name = strings.Repeat("long-app-name-", 5) + "driver"
	if edit != nil {
		edit(p)
	}
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
	return p, old
}

func legacyCluster(objs ...client.Object) client.WithWatch {
	return withEventFields(fake.NewClientBuilder()).WithObjects(objs...).WithStatusSubresource(&corev1.Pod{}).Build()
}

// TestOldNameAppIsNotHeldByADeletedClaim: a legacy-named app's StatefulSet exists, so its driver
// may have run and Spark's clean stop may have deleted a claim it mounted: that claim is not
// waited for, as for an app of the current names.
func TestOldNameAppIsNotHeldByADeletedClaim(t *testing.T) {
	ctx := context.Background()
	p, old := legacyApp(t, func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "gone-pvc-0"}}})
	})
	c := legacyCluster(p, old)
	r := &Placeholder{Client: c, APIReader: c, Events: events.NewFakeRecorder(100),
		Convert: convert.Options{Image: "registry.example/driverset:new"}, Budget: Budget{Backoff: 1, MaxBackoff: 1}, Seal: testSeal()}
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter == claimPoll || strings.Contains(got.Status.Message, "waiting for PersistentVolumeClaim") {
		t.Errorf("the legacy-named app waits for a claim its StatefulSet no longer needs: %q (requeue %s)", got.Status.Message, res.RequeueAfter)
	}
}
