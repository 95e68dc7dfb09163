package controller

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
	"github.com/driverset/driverset/webhook"
)

// An app whose StatefulSet S another build named (a rollback across a naming change, issue 34) and
// whose headless Service H is gone: the pass makes H under the name that goes with S
// (contract.NamesOfStatefulSet: S's serviceName, the subdomain of S-0, the host in the executors'
// SPARK_DRIVER_URL), and the creates webhook, asking Built, admits exactly that create. Built reads
// S from the apiserver: a StatefulSet a replica's cache still shows after its deletion names no
// Service a token may create.
func TestServiceGoesWithTheStatefulSetThePlaceholderControls(t *testing.T) {
	const third = "renamed-by-another-build"
	for _, tc := range []struct {
		name string
		// onAPIServer, inCache: where S of the third name is.
		onAPIServer, inCache bool
		// admitted: the Service that goes with S is admitted (else this build's names are built).
		admitted bool
	}{
		{"S of a third name, in the cache and on the apiserver", true, true, true},
		{"S of a third name, not in the cache yet", true, false, true},
		{"S of a third name deleted, still in the cache", false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p, _ := legacyApp(t, nil)
			other, err := convert.StatefulSet(p, convert.Options{Image: "registry.example/driverset:other", Names: contract.NamesOfStatefulSet(third)})
			if err != nil {
				t.Fatal(err)
			}
			other.UID = "7c1d9e2a-third-name"
			objs := []client.Object{p}
			if tc.onAPIServer || tc.inCache {
				objs = append(objs, other)
			}
			c := legacyCluster(objs...)
			// The cache and the apiserver each miss S when the case says so.
			missing := func(in bool) interceptor.Funcs {
				if in {
					return interceptor.Funcs{}
				}
				return interceptor.Funcs{
					Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
						if _, ok := obj.(*appsv1.StatefulSet); ok && key.Name == third {
							return apierrors.NewNotFound(appsv1.Resource("statefulsets"), key.Name)
						}
						return cl.Get(ctx, key, obj, opts...)
					},
					List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
						if err := cl.List(ctx, list, opts...); err != nil {
							return err
						}
						drop(list, third)
						return nil
					},
				}
			}
			r := &Placeholder{Client: interceptor.NewClient(c, missing(tc.inCache)), APIReader: interceptor.NewClient(c, missing(tc.onAPIServer)),
				Events: events.NewFakeRecorder(100), Convert: convert.Options{Image: "registry.example/driverset:new"},
				Budget: Budget{Backoff: 1, MaxBackoff: 1}, Seal: testSeal()}

			svc, _, refusal, err := r.Built(ctx, p)
			if err != nil || refusal != "" {
				t.Fatalf("Built: %q, %v", refusal, err)
			}
			goes := contract.NamesOfStatefulSet(third).Service
			if goes != other.Spec.ServiceName {
				t.Fatalf("the fixture's S names Service %s, NamesOfStatefulSet %s", other.Spec.ServiceName, goes)
			}
			want := map[bool]string{true: goes, false: contract.NamesFor(p.Name).Service}[tc.admitted]
			if svc.Name != want || svc.Spec.Selector[contract.LabelDriver] != map[bool]string{true: third, false: contract.NamesFor(p.Name).StatefulSet}[tc.admitted] {
				t.Fatalf("Built a Service %s selecting %v, want %s", svc.Name, svc.Spec.Selector, want)
			}

			// The creates webhook, with the controller's builder, on the Service that goes with S.
			withS, err := convert.ServiceNamed(p, contract.NamesOfStatefulSet(third))
			if err != nil {
				t.Fatal(err)
			}
			resp := (&webhook.Creates{Pods: c, Builder: r}).Handle(ctx, serviceCreate(t, withS))
			if resp.Allowed != tc.admitted {
				t.Fatalf("the creates webhook: allowed %v (%s), want %v", resp.Allowed, resp.Result.Message, tc.admitted)
			}
			if !tc.onAPIServer {
				return
			}
			// And the pass makes that Service, and no second StatefulSet.
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
				t.Fatal(err)
			}
			var made corev1.Service
			if err := c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: goes}, &made); err != nil {
				t.Fatalf("the pass made no Service %s: %v", goes, err)
			}
			if d := webhook.ServiceAsBuilt(&made, svc); d != "" || !metav1.IsControlledBy(&made, p) {
				t.Errorf("the Service made is not what Built says (%s), or not the placeholder's", d)
			}
			if ours := statefulSetsControlledBy(ctx, t, c, p); len(ours) != 1 || ours[0] != third {
				t.Errorf("the placeholder controls StatefulSets %v, want only %s", ours, third)
			}
		})
	}
}

// drop removes the StatefulSet called name from a list of StatefulSets or of their metadata.
func drop(list client.ObjectList, name string) {
	switch l := list.(type) {
	case *appsv1.StatefulSetList:
		l.Items = slices.DeleteFunc(l.Items, func(s appsv1.StatefulSet) bool { return s.Name == name })
	case *metav1.PartialObjectMetadataList:
		l.Items = slices.DeleteFunc(l.Items, func(s metav1.PartialObjectMetadata) bool { return s.Name == name })
	}
}

// serviceCreate is the admission request of driverset's create of svc.
func serviceCreate(t *testing.T, svc *corev1.Service) admission.Request {
	t.Helper()
	raw, err := json.Marshal(svc)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: admissionv1.Create, Namespace: svc.Namespace, Name: svc.Name,
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "services"},
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Service"},
		Object:   runtime.RawExtension{Raw: raw},
	}}
}
