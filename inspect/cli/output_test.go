package cli

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/driverset/driverset/contract"
)

var created = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// cluster is a namespace "jobs" with one driver running on node n1 (restarted once; its
// StatefulSet controlled by the placeholder, its driver pod by the StatefulSet), a driver still
// pending in "etl", and a plain pod.
func cluster() *fake.Clientset {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-driver", Namespace: "jobs", UID: "p-uid", CreationTimestamp: metav1.NewTime(created),
			Labels:      map[string]string{contract.LabelPlaceholder: "true", contract.LabelSparkAppSelector: "spark-123"},
			Annotations: map[string]string{contract.AnnotationRestarts: "1", contract.AnnotationRestartsTotal: "1"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: contract.DriverContainerName, Args: []string{"driver"}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "pi-driver", Namespace: "jobs", UID: "s-uid",
		Labels:          map[string]string{contract.LabelDriver: "pi-driver"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "pi-driver", UID: "p-uid", Controller: ptr.To(true)}}}}
	d := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-driver-0", Namespace: "jobs", UID: "d0", Labels: map[string]string{contract.LabelDriver: "pi-driver"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "pi-driver", UID: "s-uid", Controller: ptr.To(true)}}},
		Spec:   corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: contract.DriverContainerName}, {Name: "istio-proxy"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etl-driver", Namespace: "etl", CreationTimestamp: metav1.NewTime(created),
		Labels: map[string]string{contract.LabelPlaceholder: "true"}}}
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "jobs"}}
	return fake.NewClientset(p, sts, d, node, pending, plain)
}

func in(c kubernetes.Interface, ns string) func() (kubernetes.Interface, string, error) {
	return func() (kubernetes.Interface, string, error) { return c, ns, nil }
}

// status -o json and -o yaml print one DriverStatus document, the same in both.
func TestStatusOutput(t *testing.T) {
	want := DriverStatus{
		TypeMeta:  TypeMeta{APIVersion: "driverset.dev/v1", Kind: "DriverStatus"},
		Namespace: "jobs", Name: "pi-driver", AppID: "spark-123", Phase: "Running", Outcome: "Running", StatefulSet: "pi-driver", Service: "pi-driver-ds",
		DriverPod: "pi-driver-0 (uid d0), Running", Node: "n1: Ready",
		Restarts: 1, TotalRestarts: 1, MaxRestarts: 3, RestartWindow: "1h0m0s", Recoveries: ptr.To(0),
	}
	for _, output := range []string{"json", "yaml"} {
		t.Run(output, func(t *testing.T) {
			code, out, errOut := runWith(in(cluster(), "jobs"), "status", "pi-driver", "-o", output)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var got DriverStatus
			if err := yaml.UnmarshalStrict([]byte(out), &got); err != nil { // YAML is a superset of JSON
				t.Fatalf("%v:\n%s", err, out)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("status -o %s:\n%s\nwant %+v", output, out, want)
			}
		})
	}
	// The names scripts read are the promise: a golden of the keys.
	_, out, _ := runWith(in(cluster(), "jobs"), "status", "pi-driver", "-o", "json")
	var keys map[string]any
	if err := json.Unmarshal([]byte(out), &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"apiVersion", "kind", "namespace", "name", "appID", "phase", "outcome", "driverPod", "node",
		"restarts", "totalRestarts", "maxRestarts", "restartWindow", "recoveries"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("status -o json has no key %q:\n%s", k, out)
		}
	}
}

// A tenant who may not read Nodes or Events: status prints, with what is not visible said so.
func TestStatusAsATenant(t *testing.T) {
	c := cluster()
	for _, resource := range []string{"nodes", "events"} {
		c.PrependReactor("*", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: a.GetResource().Resource}, "", errors.New("RBAC"))
		})
	}
	code, out, errOut := runWith(in(c, "jobs"), "status", "pi-driver")
	if code != 0 || !strings.Contains(out, "Node:         n1: not visible (") || !strings.Contains(out, "Recoveries:   not visible (") {
		t.Errorf("status as a tenant: exit %d, %s\n%s", code, errOut, out)
	}
	_, out, _ = runWith(in(c, "jobs"), "status", "pi-driver", "-o", "json")
	var got DriverStatus
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Recoveries != nil || strings.Join(got.NotVisible, ",") != "nodes,events" {
		t.Errorf("status -o json as a tenant: recoveries %v, notVisible %v", got.Recoveries, got.NotVisible)
	}
	if code, out, _ := runWith(in(c, "jobs"), "why", "pi-driver"); code != 0 || !strings.Contains(out, "Events are not visible") {
		t.Errorf("why as a tenant: exit %d, %s", code, out)
	}
}

// list: the drivers of the namespace (-A: of every namespace), as a table or a DriverList.
func TestList(t *testing.T) {
	now = func() time.Time { return created.Add(2 * time.Hour) }
	t.Cleanup(func() { now = time.Now })
	code, out, errOut := runWith(in(cluster(), "jobs"), "list")
	if code != 0 || out != "NAME        PHASE     RESTARTS       DRIVER POD    NODE   AGE\n"+
		"pi-driver   Running   1 (1 in all)   pi-driver-0   n1     120m\n" {
		t.Errorf("list: exit %d, %s\n%q", code, errOut, out)
	}
	code, out, _ = runWith(in(cluster(), "jobs"), "list", "-A")
	if code != 0 || !strings.Contains(out, "NAMESPACE   NAME") || !strings.Contains(out, "etl         etl-driver   Pending") {
		t.Errorf("list -A: exit %d\n%s", code, out)
	}
	code, out, _ = runWith(in(cluster(), "jobs"), "list", "-A", "-o", "yaml")
	var got DriverList
	if err := yaml.UnmarshalStrict([]byte(out), &got); err != nil || code != 0 {
		t.Fatalf("list -A -o yaml: exit %d, %v\n%s", code, err, out)
	}
	want := DriverList{TypeMeta: TypeMeta{APIVersion: "driverset.dev/v1", Kind: "DriverList"}, Items: []DriverListItem{
		{Namespace: "etl", Name: "etl-driver", Phase: "Pending", Outcome: "Pending", Created: created},
		{Namespace: "jobs", Name: "pi-driver", Phase: "Running", Outcome: "Running", Restarts: 1, TotalRestarts: 1, DriverPod: "pi-driver-0", Node: "n1", Created: created},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("list -A -o yaml:\n%s\nwant %+v", out, want)
	}
	code, out, _ = runWith(in(fake.NewClientset(), "empty"), "list", "-o", "json")
	if code != 0 || !strings.Contains(out, `"items": []`) {
		t.Errorf("list -o json of no drivers: exit %d, %s", code, out)
	}
}

// logs passes -c, --since, --timestamps, --tail, -f and -p to the pod log request of the
// current incarnation.
func TestLogsFlags(t *testing.T) {
	c := cluster()
	code, out, errOut := runWith(in(c, "jobs"), "logs", "pi-driver", "-c", "istio-proxy", "--since", "2m", "--timestamps", "--tail", "3", "-f", "-p")
	if code != 0 || out != "fake logs" {
		t.Fatalf("logs: exit %d, %q, %s", code, out, errOut)
	}
	var got *corev1.PodLogOptions
	for _, a := range c.Actions() {
		if a.GetSubresource() == "log" {
			got = a.(k8stesting.GenericAction).GetValue().(*corev1.PodLogOptions)
		}
	}
	want := &corev1.PodLogOptions{Container: "istio-proxy", SinceSeconds: ptr.To[int64](120), Timestamps: true, TailLines: ptr.To[int64](3), Follow: true, Previous: true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("log request %+v, want %+v", got, want)
	}
	if code, _, errOut := runWith(in(c, "jobs"), "logs", "pi-driver", "-c", "nope"); code != 1 || !strings.Contains(errOut, `no container "nope"`) {
		t.Errorf("logs -c nope: exit %d, %s", code, errOut)
	}
}
