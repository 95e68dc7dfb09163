package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
			ours := statefulSetsControlledBy(ctx, t, c, p)
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
	if err := testSeal().Sign(p, "alice"); err != nil {
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

// TestOldNameAppIsNotHeldByADeletedClaim: an app whose StatefulSet exists under another name than
// this build gives (the legacy 32-bit suffix, or a third name across a rollback), found in the
// cache or only on the apiserver, may have run its driver, and Spark's clean stop may have deleted
// a claim it mounted: that claim is not waited for, as for an app of the current names. Were S
// looked for by this build's name, every pass would wait for the claim (issue 34: "a deleted
// claim blocks every later pass").
func TestOldNameAppIsNotHeldByADeletedClaim(t *testing.T) {
	for _, tc := range []struct {
		name      string
		third     bool // S under a third name, else the legacy one
		notCached bool
	}{
		{"the legacy name", false, false},
		{"the legacy name, not in the cache yet", false, true},
		{"a third name", true, false},
		{"a third name, not in the cache yet", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p, old := legacyApp(t, func(p *corev1.Pod) {
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "gone-pvc-0"}}})
			})
			if tc.third {
				var err error
				if old, err = convert.StatefulSet(p, convert.Options{Image: "registry.example/driverset:other", Names: contract.NamesOfStatefulSet("renamed-by-another-build")}); err != nil {
					t.Fatal(err)
				}
			}
			c := legacyCluster(p, old)
			var cached client.Client = c
			if tc.notCached {
				cached = withoutStatefulSets(c)
			}
			r := &Placeholder{Client: cached, APIReader: c, Events: events.NewFakeRecorder(100),
				Convert: convert.Options{Image: "registry.example/driverset:new"}, Budget: Budget{Backoff: 1, MaxBackoff: 1}, Seal: testSeal()}
			for pass := range 2 {
				res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
				if err != nil {
					t.Fatal(err)
				}
				var got corev1.Pod
				if err := c.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
					t.Fatal(err)
				}
				if res.RequeueAfter == claimPoll || strings.Contains(got.Status.Message, "waiting for PersistentVolumeClaim") {
					t.Errorf("pass %d: the app waits for a claim its StatefulSet no longer needs: %q (requeue %s)", pass+1, got.Status.Message, res.RequeueAfter)
				}
			}
			if ours := statefulSetsControlledBy(ctx, t, c, p); len(ours) != 1 || ours[0] != old.Name {
				t.Errorf("the placeholder controls StatefulSets %v, want only %s", ours, old.Name)
			}
		})
	}
}

// withoutStatefulSets is c as a cache that has seen no StatefulSet yet (a new leader's, a watch
// behind): the apiserver (c itself) still has them.
func withoutStatefulSets(c client.WithWatch) client.Client {
	return interceptor.NewClient(c, interceptor.Funcs{
		List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*appsv1.StatefulSetList); ok {
				return nil
			}
			return cl.List(ctx, list, opts...)
		},
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*appsv1.StatefulSet); ok {
				return apierrors.NewNotFound(appsv1.Resource("statefulsets"), key.Name)
			}
			return cl.Get(ctx, key, obj, opts...)
		},
	})
}

// TestStatefulSetFoundByItsController: S is the StatefulSet P controls, under whatever name it
// was made (a rollback across a naming change, a later driverset's naming), found by P's UID in
// the cache's index or, when the cache has not seen it yet, on the apiserver: never a second S,
// a second driver, under the name this build would give. One that P does not control, whatever
// its name, is not S.
func TestStatefulSetFoundByItsController(t *testing.T) {
	const third = "renamed-by-another-build"
	for _, tc := range []struct {
		name       string
		controlled bool
		notCached  bool
		want       func(p *corev1.Pod) string
		from       Source
	}{
		{"under a third name, in the cache", true, false, func(*corev1.Pod) string { return third }, FromCache},
		{"under a third name, not in the cache yet", true, true, func(*corev1.Pod) string { return third }, FromAPIServer},
		{"a third name's StatefulSet P does not control: this build's names", false, false,
			func(p *corev1.Pod) string { return contract.NamesFor(p.Name).StatefulSet }, Skipped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p, _ := legacyApp(t, nil)
			other, err := convert.StatefulSet(p, convert.Options{Image: "registry.example/driverset:other", Names: contract.NamesOfStatefulSet(third)})
			if err != nil {
				t.Fatal(err)
			}
			other.UID = "7c1d9e2a-third-name"
			if !tc.controlled {
				other.OwnerReferences[0].UID = "uid-of-an-earlier-placeholder"
			}
			c := legacyCluster(p, other)
			var cached client.Client = c
			if tc.notCached {
				cached = interceptor.NewClient(c, interceptor.Funcs{
					List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
						if _, ok := list.(*appsv1.StatefulSetList); ok {
							return nil // the cache has none yet
						}
						return cl.List(ctx, list, opts...)
					},
					Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
						if _, ok := obj.(*appsv1.StatefulSet); ok && key.Name == third {
							return apierrors.NewNotFound(appsv1.Resource("statefulsets"), key.Name)
						}
						return cl.Get(ctx, key, obj, opts...)
					},
				})
			}
			r := &Placeholder{Client: cached, APIReader: c, Events: events.NewFakeRecorder(100),
				Convert: convert.Options{Image: "registry.example/driverset:new"}, Budget: Budget{Backoff: 1, MaxBackoff: 1}, Seal: testSeal()}
			_, from, err := r.namesOf(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if from.From != tc.from || from.Value != map[bool]string{true: third, false: ""}[tc.controlled] {
				t.Errorf("S found as %q from %q, want %q from %q", from.Value, from.From, map[bool]string{true: third}[tc.controlled], tc.from)
			}
			// The pass's snapshot says the same.
			s, err := r.observe(ctx, client.ObjectKeyFromObject(p))
			if err != nil {
				t.Fatal(err)
			}
			if s.Found.From != from.From || s.Found.Value != from.Value || s.Names.StatefulSet != tc.want(p) {
				t.Errorf("snapshot: found %+v, names %+v, want %+v and %s", s.Found, s.Names, from, tc.want(p))
			}
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
				t.Fatal(err)
			}
			ours := statefulSetsControlledBy(ctx, t, c, p)
			if want := tc.want(p); len(ours) != 1 || ours[0] != want {
				t.Errorf("the placeholder controls StatefulSets %v, want only %s", ours, want)
			}
		})
	}
}

// TestControlledBy is namesOf's decision: the StatefulSet P controls, by UID; of two (made before
// S was found by its controller), the oldest, then the first by name, so that every pass and
// every replica keeps to one.
func TestControlledBy(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pi-driver", UID: "uid-p"}}
	yes := true
	set := func(name string, owner types.UID, created time.Duration) metav1.Object {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(created)),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "pi-driver", UID: owner, Controller: &yes}}}}
	}
	for _, tc := range []struct {
		name string
		sets []metav1.Object
		want string
	}{
		{"none", nil, ""},
		{"one P controls, under any name", []metav1.Object{set("renamed", "uid-p", 0)}, "renamed"},
		{"one of P's name, controlled by an earlier placeholder of that name", []metav1.Object{set("pi-driver", "uid-p-before", 0)}, ""},
		{"two: the oldest", []metav1.Object{set("pi-driver", "uid-p", time.Minute), set("legacy", "uid-p", 0)}, "legacy"},
		{"two made at once: the first by name", []metav1.Object{set("b", "uid-p", 0), set("a", "uid-p", 0)}, "a"},
		{"another's older one is not P's", []metav1.Object{set("old", "uid-other", -time.Hour), set("pi-driver", "uid-p", 0)}, "pi-driver"},
	} {
		if got := controlledBy(p, tc.sets); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// statefulSetsControlledBy names the StatefulSets of p's namespace that p controls.
func statefulSetsControlledBy(ctx context.Context, t *testing.T, c client.Client, p *corev1.Pod) []string {
	t.Helper()
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
	return ours
}
