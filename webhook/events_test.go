package webhook

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/driverset/driverset/contract"
)

// The events entry: which Events driverset's ServiceAccount may record, as a table of the Event's
// references against the pods that exist.
func TestEvents(t *testing.T) {
	const ns = "team-a"
	long := strings.Repeat("p", 60) // its StatefulSet's name is shortened and hashed
	pod := func(name string, labels, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: labels, Annotations: annotations}}
	}
	placeholder := pod("pi", map[string]string{contract.LabelPlaceholder: "true"}, nil)
	recorded := pod("recorded", nil, map[string]string{contract.AnnotationResources: "{}"})
	longOne := pod(long, map[string]string{contract.LabelPlaceholder: "true"}, nil)
	web := pod("web", map[string]string{"app": "web"}, nil)
	driver := pod("pi-0", map[string]string{contract.LabelDriver: "pi", contract.LabelSparkRole: contract.RoleDriver}, nil)
	// A StatefulSet the placeholder controls under a name this build does not give (a rollback
	// across a naming change): the controller finds it by its controller (namesOf), and relates
	// its Events to it. Another of a name not the placeholder's, controlled by someone else.
	yes := true
	renamed := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "renamed", Namespace: ns, UID: "uid-renamed",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "pi", UID: "uid-pi", Controller: &yes}}}}
	notOurs := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "not-ours", Namespace: ns, UID: "uid-not-ours",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "pi", UID: "uid-an-earlier-pi", Controller: &yes}}}}
	pods := fake.NewClientBuilder().WithObjects(placeholder, recorded, longOne, web, driver, renamed, notOurs).Build()

	ref := func(p *corev1.Pod) corev1.ObjectReference {
		return corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
	}
	sts := func(name string) *corev1.ObjectReference {
		return &corev1.ObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: ns, Name: name}
	}
	podNamed := func(name string) *corev1.ObjectReference {
		return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: name}
	}
	with := func(r corev1.ObjectReference, change func(*corev1.ObjectReference)) corev1.ObjectReference {
		change(&r)
		return r
	}
	tests := []struct {
		name      string
		regarding corev1.ObjectReference
		related   *corev1.ObjectReference
		allowed   bool
		says      string
	}{
		{"about a placeholder", ref(placeholder), nil, true, "placeholder pi"},
		{"about a pod whose resources driverset recorded", ref(recorded), nil, true, "placeholder recorded"},
		{"related to its StatefulSet", ref(placeholder), sts("pi"), true, "placeholder pi"},
		{"related to its driver pod", ref(placeholder), podNamed("pi-0"), true, "placeholder pi"},
		{"related to a long name's StatefulSet", ref(longOne), sts(contract.NamesFor(long).StatefulSet), true, "placeholder"},
		{"related to a long name's StatefulSet under its legacy name", ref(longOne), sts(contract.LegacyNamesFor(long).StatefulSet), true, "placeholder"},
		{"related to the StatefulSet it controls under another name", ref(placeholder), sts("renamed"), true, "placeholder pi"},
		{"related to the driver pod of the StatefulSet it controls under another name", ref(placeholder), podNamed("renamed-0"), true, "placeholder pi"},
		{"related to a StatefulSet an earlier placeholder of its name controls", ref(placeholder), sts("not-ours"), false, "neither the StatefulSet"},
		{"related to the driver pod of a StatefulSet it does not control", ref(placeholder), podNamed("not-ours-0"), false, "neither the StatefulSet"},
		{"about a tenant's pod", ref(web), nil, false, "pod web is not a placeholder"},
		{"about a driver pod", ref(driver), nil, false, "pod pi-0 is not a placeholder"},
		{"under a forged UID", with(ref(placeholder), func(r *corev1.ObjectReference) { r.UID = "uid-forged" }), nil, false, "pod pi is uid-pi, not uid-forged"},
		{"without a UID", with(ref(placeholder), func(r *corev1.ObjectReference) { r.UID = "" }), nil, false, "without its UID"},
		{"about a pod that does not exist", with(ref(placeholder), func(r *corev1.ObjectReference) { r.Name = "gone" }), nil, false, "pod gone does not exist"},
		{"about another namespace's pod", with(ref(placeholder), func(r *corev1.ObjectReference) { r.Namespace = "kube-system" }), nil, false, "pods of the Event's namespace"},
		{"about a Node", corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "node-1"}, nil, false, "pods of the Event's namespace"},
		{"related to a tenant's pod", ref(placeholder), podNamed("web"), false, "neither the StatefulSet"},
		{"related to another StatefulSet", ref(placeholder), sts("theirs"), false, "neither the StatefulSet"},
		{"related to its StatefulSet's name as a pod", ref(placeholder), podNamed("pi"), false, "neither the StatefulSet"},
		{"related to its StatefulSet in another namespace", ref(placeholder),
			&corev1.ObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: "other", Name: "pi"}, false, "neither the StatefulSet"},
	}
	for _, tc := range tests {
		for _, api := range []string{"events.k8s.io", "core"} {
			t.Run(tc.name+" ("+api+")", func(t *testing.T) {
				req := eventRequest(t, api, tc.regarding, tc.related)
				resp := (&Events{Pods: pods}).Handle(context.Background(), req)
				if resp.Allowed != tc.allowed || !strings.Contains(resp.Result.Message, tc.says) {
					t.Fatalf("allowed %v (%s), want %v saying %q", resp.Allowed, resp.Result.Message, tc.allowed, tc.says)
				}
				if !tc.allowed && resp.AuditAnnotations[AuditDenialReason] != ReasonNotItsOwn {
					t.Errorf("denial reason %q, want %q", resp.AuditAnnotations[AuditDenialReason], ReasonNotItsOwn)
				}
				if len(resp.Patches) > 0 || resp.Patch != nil {
					t.Fatalf("patched: %v", resp.Patches)
				}
			})
		}
	}
}

// A series patch reaches the entry as an UPDATE of the whole Event; the pod cannot be read: the
// entry fails closed (the recorder drops the Event); anything but an Event write is let be.
func TestEventsUpdatesFailuresAndOthers(t *testing.T) {
	placeholder := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "team-a", UID: "uid-pi", Labels: map[string]string{contract.LabelPlaceholder: "true"}}}
	pods := fake.NewClientBuilder().WithObjects(placeholder).Build()
	about := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "team-a", Name: "pi", UID: "uid-pi"}

	update := eventRequest(t, "events.k8s.io", about, nil)
	update.Operation = admissionv1.Update
	if resp := (&Events{Pods: pods}).Handle(context.Background(), update); !resp.Allowed {
		t.Errorf("a series patch of its own Event: %s", resp.Result.Message)
	}
	update = eventRequest(t, "events.k8s.io", corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "team-a", Name: "web", UID: "uid-web"}, nil)
	update.Operation = admissionv1.Update
	if resp := (&Events{Pods: pods}).Handle(context.Background(), update); resp.Allowed {
		t.Error("a patch of an Event about a pod that does not exist was admitted")
	}
	if resp := (&Events{Pods: failingReader{}}).Handle(context.Background(), eventRequest(t, "events.k8s.io", about, nil)); resp.Allowed ||
		!strings.Contains(resp.Result.Message, "connection refused") {
		t.Errorf("the pod unreadable: allowed %v (%s), want refused", resp.Allowed, resp.Result.Message)
	}
	others := eventRequest(t, "events.k8s.io", about, nil)
	others.Operation = admissionv1.Delete
	if resp := (&Events{Pods: failingReader{}}).Handle(context.Background(), others); !resp.Allowed {
		t.Errorf("a delete: %s", resp.Result.Message)
	}
	cm := createsRequest(t, metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ConfigMap", map[string]any{})
	if resp := (&Events{Pods: failingReader{}}).Handle(context.Background(), cm); !resp.Allowed {
		t.Errorf("a ConfigMap: %s", resp.Result.Message)
	}
}

// eventRequest is the admission request for the create of an Event of namespace team-a through
// api ("events.k8s.io", or "core" for core/v1), regarding regarding and related to related.
func eventRequest(t *testing.T, api string, regarding corev1.ObjectReference, related *corev1.ObjectReference) admission.Request {
	t.Helper()
	meta := metav1.ObjectMeta{Name: "pi.1", Namespace: "team-a"}
	if api == "core" {
		r := createsRequest(t, metav1.GroupVersionResource{Version: "v1", Resource: "events"}, "Event",
			&corev1.Event{ObjectMeta: meta, InvolvedObject: regarding, Related: related, Reason: "Converted"})
		r.Name = meta.Name
		return r
	}
	r := createsRequest(t, metav1.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}, "Event",
		&eventsv1.Event{ObjectMeta: meta, Regarding: regarding, Related: related, Reason: "Converted", ReportingController: "driverset.dev/controller"})
	r.Name = meta.Name
	return r
}
