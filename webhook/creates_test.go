package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// builder answers as controller.Placeholder.Built would for the placeholder "pi" of built().
type builder struct {
	refusal string
	err     error
}

func (b builder) Built(_ context.Context, p *corev1.Pod) (*corev1.Service, *appsv1.StatefulSet, string, error) {
	if b.err != nil || b.refusal != "" {
		return nil, nil, b.refusal, b.err
	}
	yes := true
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-ds", Namespace: p.Namespace, Labels: map[string]string{"driverset.dev/driver": "pi"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"driverset.dev/driver": "pi", "spark-role": "driver"},
			Ports: []corev1.ServicePort{{Name: "driver-rpc-port", Port: 7078, TargetPort: intstr.FromInt32(7078)}}, PublishNotReadyAddresses: true},
	}
	return svc, built(), "", nil
}

// failingReader fails every read, as an apiserver out of reach would.
type failingReader struct{ client.Reader }

func (failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("connection refused")
}

func createsRequest(t *testing.T, resource metav1.GroupVersionResource, kind string, obj any) admission.Request {
	t.Helper()
	raw, ok := obj.([]byte)
	if !ok {
		var err error
		if raw, err = json.Marshal(obj); err != nil {
			t.Fatal(err)
		}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: admissionv1.Create, Namespace: "team-a", Name: "pi",
		Resource: resource, Kind: metav1.GroupVersionKind{Group: resource.Group, Version: "v1", Kind: kind},
		Object: runtime.RawExtension{Raw: raw},
	}}
}

// The creates entry: what is admitted from driverset's ServiceAccount, and what is refused.
func TestCreates(t *testing.T) {
	statefulSets := metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	services := metav1.GroupVersionResource{Version: "v1", Resource: "services"}
	placeholder := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "team-a", UID: "uid-pi"}}
	pods := fake.NewClientBuilder().WithObjects(placeholder).Build()
	sts := asTheAPIServerDecodesIt(built())
	unowned := sts.DeepCopy()
	unowned.OwnerReferences = nil
	orphan := sts.DeepCopy()
	orphan.OwnerReferences[0].Name = "gone"
	privileged := sts.DeepCopy()
	privileged.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: new(true)}
	svc, _, _, _ := builder{}.Built(context.Background(), placeholder)
	loadBalancer := svc.DeepCopy()
	loadBalancer.Spec.Type = corev1.ServiceTypeLoadBalancer
	unknown, err := json.Marshal(sts)
	if err != nil {
		t.Fatal(err)
	}
	unknown = []byte(strings.Replace(string(unknown), `"spec":{`, `"spec":{"hostUsersOfTheFuture":true,`, 1))

	tests := []struct {
		name    string
		c       *Creates
		req     admission.Request
		allowed bool
		says    string
	}{
		{"a StatefulSet as driverset builds it", &Creates{Pods: pods, Builder: builder{}}, createsRequest(t, statefulSets, "StatefulSet", sts), true, "what driverset builds"},
		{"a Service as driverset builds it", &Creates{Pods: pods, Builder: builder{}}, createsRequest(t, services, "Service", svc), true, "what driverset builds"},
		{"a StatefulSet privileged", &Creates{Pods: pods, Builder: builder{}}, createsRequest(t, statefulSets, "StatefulSet", privileged), false,
			"not what driverset builds from placeholder pi (spec.template.spec.containers[0].securityContext is set, driverset builds none)"},
		{"a LoadBalancer", &Creates{Pods: pods, Builder: builder{}}, createsRequest(t, services, "Service", loadBalancer), false, `spec.type is "LoadBalancer"`},
		{"owned by no pod", &Creates{Pods: pods, Builder: builder{}}, createsRequest(t, statefulSets, "StatefulSet", unowned), false, "which that pod controls"},
		{"owned by a pod that does not exist", &Creates{Pods: pods, Builder: builder{}}, createsRequest(t, statefulSets, "StatefulSet", orphan), false, "pod gone, does not exist"},
		{"owned by a pod driverset builds nothing for", &Creates{Pods: pods, Builder: builder{refusal: "driverset builds no driver from this pod: no seal"}},
			createsRequest(t, statefulSets, "StatefulSet", sts), false, "no seal"},
		{"a field this build does not know", &Creates{Pods: pods, Builder: builder{}}, createsRequest(t, statefulSets, "StatefulSet", unknown), false, "hostUsersOfTheFuture"},
		{"the owner cannot be read: fails closed", &Creates{Pods: failingReader{}, Builder: builder{}}, createsRequest(t, statefulSets, "StatefulSet", sts), false, "connection refused"},
		{"the builder fails: fails closed", &Creates{Pods: pods, Builder: builder{err: errors.New("cache not synced")}}, createsRequest(t, statefulSets, "StatefulSet", sts), false, "cache not synced"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := tc.c.Handle(context.Background(), tc.req)
			if resp.Allowed != tc.allowed || !strings.Contains(resp.Result.Message, tc.says) {
				t.Fatalf("allowed %v (%s), want %v saying %q", resp.Allowed, resp.Result.Message, tc.allowed, tc.says)
			}
			if len(resp.Patches) > 0 || resp.Patch != nil {
				t.Fatalf("patched: %v", resp.Patches)
			}
		})
	}
}

func TestCreatesLeavesOtherRequestsAlone(t *testing.T) {
	c := &Creates{Pods: failingReader{}, Builder: builder{err: errors.New("never asked")}}
	req := createsRequest(t, metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ConfigMap", map[string]any{})
	if resp := c.Handle(context.Background(), req); !resp.Allowed {
		t.Errorf("a ConfigMap: %s", resp.Result.Message)
	}
	req = createsRequest(t, metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, "StatefulSet", map[string]any{})
	req.Operation = admissionv1.Update
	if resp := c.Handle(context.Background(), req); !resp.Allowed {
		t.Errorf("an update: %s", resp.Result.Message)
	}
}
