package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// sparkDriver is a minimal driver pod as spark-submit posts it, opted in by label.
func sparkDriver() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "pi-0123456789abcdef-driver", Namespace: "jobs",
			Labels: map[string]string{
				contract.LabelSparkRole:        contract.RoleDriver,
				contract.LabelSparkAppSelector: "spark-0123456789abcdef0123456789abcdef",
				contract.LabelResilient:        "true",
			},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:  contract.DriverContainerName,
				Image: "apache/spark:3.5.3",
				Args:  []string{"driver", "--properties-file", "/opt/spark/conf/spark.properties", "--class", "Pi", "spark-internal"},
			}},
		},
	}
}

func encode(t *testing.T, pod *corev1.Pod) []byte {
	t.Helper()
	b, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDriverDecides is the driver webhook's contract, one row per rule.
func TestDriverDecides(t *testing.T) {
	type verdict int
	const (
		unchanged verdict = iota // allowed, no patch
		converted                // allowed, patched into a placeholder
		denied                   // 403 with the reason
	)
	cases := []struct {
		name     string
		enforced bool
		pod      func(*corev1.Pod)
		want     verdict
		message  string // a part of the response's message
		warning  string // a part of the response's one warning, "" = no warning
	}{
		{name: "opted-in driver is converted", want: converted, message: "converted to a driverset placeholder"},
		{name: "driver without the label is left alone", pod: func(p *corev1.Pod) { delete(p.Labels, contract.LabelResilient) },
			want: unchanged, message: "not opted in"},
		{name: "label value other than true is not an opt-in", pod: func(p *corev1.Pod) { p.Labels[contract.LabelResilient] = "yes" },
			want: unchanged, message: "not opted in"},
		{name: "enforced namespace converts a driver without the label", enforced: true,
			pod: func(p *corev1.Pod) { delete(p.Labels, contract.LabelResilient) }, want: converted},
		{name: "executor pod is left alone", enforced: true, pod: func(p *corev1.Pod) { p.Labels[contract.LabelSparkRole] = contract.RoleExecutor },
			want: unchanged, message: "not a Spark driver pod"},
		{name: "pod without spark-role is left alone", enforced: true, pod: func(p *corev1.Pod) { delete(p.Labels, contract.LabelSparkRole) },
			want: unchanged, message: "not a Spark driver pod"},
		{name: "driverset's own driver pod is left alone", enforced: true, pod: func(p *corev1.Pod) { p.Labels[contract.LabelDriver] = "pi-driver" },
			want: unchanged, message: "already run by driverset"},
		{name: "driverset's own driver pod is left alone even with an empty label value", pod: func(p *corev1.Pod) { p.Labels[contract.LabelDriver] = "" },
			want: unchanged, message: "already run by driverset"},
		{name: "its own placeholder, seen again, is left as it is", pod: func(p *corev1.Pod) { sealedPlaceholder(p) },
			want: unchanged, message: "already a driverset placeholder"},
		{name: "its own placeholder without the gate is denied", pod: func(p *corev1.Pod) {
			sealedPlaceholder(p)
			p.Spec.SchedulingGates = nil
		}, want: denied, message: "but not its scheduling gate"},
		{name: "placeholder label, unsealed, is denied", pod: func(p *corev1.Pod) { p.Labels[contract.LabelPlaceholder] = "true" },
			want: denied, message: "arrives shaped as a driverset placeholder"},
		{name: "a placeholder shaped by its creator is denied", pod: func(p *corev1.Pod) {
			if err := convert.ToPlaceholder(p); err != nil {
				panic(err)
			}
		}, want: denied, message: "it has no seal"},
		{name: "its own placeholder with a GPU added to the recorded resources is denied", pod: func(p *corev1.Pod) {
			sealedPlaceholder(p)
			p.Annotations[contract.AnnotationResources] = `{"spark-kubernetes-driver":{"limits":{"nvidia.com/gpu":"8"}}}`
		}, want: denied, message: "does not match its name and its recorded resources"},
		{name: "its own placeholder's seal moved to another pod is denied", pod: func(p *corev1.Pod) {
			sealedPlaceholder(p)
			p.Name = "other-driver"
		}, want: denied, message: "does not match"},
		{name: "no driver container is denied", pod: func(p *corev1.Pod) { p.Spec.Containers[0].Name, p.Spec.Containers[0].Args = "main", nil },
			want: denied, message: `no container named "spark-kubernetes-driver"`},
		{name: "args not beginning with driver are denied", pod: func(p *corev1.Pod) { p.Spec.Containers[0].Args[0] = "--driver" },
			want: denied, message: `begin with "--driver", not "driver"`},
		{name: "a pod with a controller is denied", pod: func(p *corev1.Pod) {
			yes := true
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "nightly", UID: "u1", Controller: &yes}}
		}, want: denied, message: `controlled by Job "nightly" (batch/v1), not by a pod`},
		{name: "an operator's driver, owned but not controlled by its SparkApplication, is denied", pod: func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "spark.apache.org/v1", Kind: "SparkApplication", Name: "pi", UID: "u1"}}
		}, want: denied, message: `owned by SparkApplication "pi" (spark.apache.org/v1), not by a pod`},
		{name: "a driver labelled as the Kubeflow operator's, before its webhook adds the owner, is denied", pod: func(p *corev1.Pod) {
			p.Labels["sparkoperator.k8s.io/launched-by-spark-operator"] = "true"
		}, want: denied, message: `labelled sparkoperator.k8s.io/launched-by-spark-operator=true`},
		{name: "a driver owned by the pod spark-submit ran in is converted", pod: func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "jupyter-0", UID: "u1"}}
		}, want: converted, message: "converted to a driverset placeholder"},
		// Re-invocation: another mutating webhook, called after driverset's, made the placeholder
		// an operator's. It cannot run as it is (it is gated, its resources shrunk) nor stay (it
		// would be Pending forever): refused, under either entry.
		{name: "its own placeholder, given an operator's controller by a later webhook, is denied", pod: func(p *corev1.Pod) {
			sealedPlaceholder(p)
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "sparkoperator.k8s.io/v1beta2", Kind: "SparkApplication", Name: "pi", UID: "u1", Controller: new(true)}}
		}, want: denied, message: "after driverset had made it a placeholder"},
		{name: "enforced: its own placeholder, given an operator's controller by a later webhook, is denied, not left as it is", enforced: true, pod: func(p *corev1.Pod) {
			delete(p.Labels, contract.LabelResilient)
			sealedPlaceholder(p)
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "sparkoperator.k8s.io/v1beta2", Kind: "SparkApplication", Name: "pi", UID: "u1", Controller: new(true)}}
		}, want: denied, message: "refused rather than left Pending"},
		{name: "enforced: its own placeholder, its container renamed by a later webhook, is denied, not left as it is", enforced: true, pod: func(p *corev1.Pod) {
			delete(p.Labels, contract.LabelResilient)
			sealedPlaceholder(p)
			p.Spec.Containers[0].Name, p.Spec.Containers[0].Args = "main", []string{"run"}
		}, want: denied, message: `no container named "spark-kubernetes-driver"`},
		{name: "a volume named driverset is denied", pod: func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "driverset"})
		}, want: denied, message: `already has a volume named "driverset"`},
		{name: "invalid max-restarts is denied", pod: func(p *corev1.Pod) {
			p.Annotations = map[string]string{contract.AnnotationMaxRestarts: "101"}
		}, want: denied, message: `driverset.dev/max-restarts="101" is not an integer from 0 to 100`},
		{name: "a restart-window under a minute is denied", pod: func(p *corev1.Pod) {
			p.Annotations = map[string]string{contract.AnnotationRestartWindow: "10s"}
		}, want: denied, message: `driverset.dev/restart-window="10s" is not 0 or a duration from 1m to 720h`},
		{name: "invalid fence-after is denied", pod: func(p *corev1.Pod) {
			p.Annotations = map[string]string{contract.AnnotationFenceAfter: "2 minutes"}
		}, want: denied, message: `driverset.dev/fence-after="2 minutes" is not a duration`},
		{name: "relative entrypoint is denied", pod: func(p *corev1.Pod) {
			p.Annotations = map[string]string{contract.AnnotationEntrypoint: "entrypoint.sh"}
		}, want: denied, message: `driverset.dev/entrypoint="entrypoint.sh" is not an absolute path`},

		// The namespace policy converts spark-submit's cluster drivers; a spark-role=driver pod that
		// is not one (an operator's, a Deployment's, a client-mode driver) was never driverset's to
		// refuse: it runs as it is, and the user is told. The explicit opt-in label keeps the denial.
		{name: "enforced: a driver controlled by an operator runs unconverted, with a warning", enforced: true, pod: func(p *corev1.Pod) {
			delete(p.Labels, contract.LabelResilient)
			yes := true
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "sparkoperator.k8s.io/v1beta2", Kind: "SparkApplication", Name: "pi", UID: "u1", Controller: &yes}}
		}, want: unchanged, message: "not a spark-submit cluster driver", warning: `controlled by SparkApplication "pi" (sparkoperator.k8s.io/v1beta2), not by a pod`},
		{name: "enforced: a Deployment's driver pod runs unconverted, with a warning", enforced: true, pod: func(p *corev1.Pod) {
			delete(p.Labels, contract.LabelResilient)
			yes := true
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "notebook-5d9c", UID: "u1", Controller: &yes}}
		}, want: unchanged, message: "not a spark-submit cluster driver", warning: `controlled by ReplicaSet "notebook-5d9c" (apps/v1), not by a pod`},
		{name: "enforced: a client-mode driver runs unconverted, with a warning", enforced: true, pod: func(p *corev1.Pod) {
			delete(p.Labels, contract.LabelResilient)
			p.Spec.Containers[0].Name = "notebook"
			p.Spec.Containers[0].Args = []string{"spark-submit", "--deploy-mode", "client", "app.py"}
		}, want: unchanged, message: "not a spark-submit cluster driver", warning: `no container named "spark-kubernetes-driver"`},
		{name: "enforced: args not beginning with driver run unconverted, with a warning", enforced: true, pod: func(p *corev1.Pod) {
			delete(p.Labels, contract.LabelResilient)
			p.Spec.Containers[0].Args = []string{"spark-shell"}
		}, want: unchanged, message: "not a spark-submit cluster driver", warning: `begin with "spark-shell", not "driver"`},
		{name: "enforced: an operator's driver, owned but not controlled by its SparkApplication, runs unconverted, with a warning", enforced: true, pod: func(p *corev1.Pod) {
			delete(p.Labels, contract.LabelResilient)
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "spark.apache.org/v1", Kind: "SparkApplication", Name: "pi", UID: "u1", BlockOwnerDeletion: new(true)}}
		}, want: unchanged, message: "not a spark-submit cluster driver", warning: `owned by SparkApplication "pi" (spark.apache.org/v1), not by a pod`},
		{name: "enforced: a driver labelled as the Kubeflow operator's runs unconverted before its webhook adds the owner", enforced: true, pod: func(p *corev1.Pod) {
			delete(p.Labels, contract.LabelResilient)
			p.Labels["sparkoperator.k8s.io/launched-by-spark-operator"] = "true"
		}, want: unchanged, message: "not a spark-submit cluster driver", warning: `labelled sparkoperator.k8s.io/launched-by-spark-operator=true`},
		{name: "enforced with the opt-in label: a controlled driver is still denied", enforced: true, pod: func(p *corev1.Pod) {
			yes := true
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "notebook-5d9c", UID: "u1", Controller: &yes}}
		}, want: denied, message: `controlled by ReplicaSet "notebook-5d9c" (apps/v1), not by a pod`},
		{name: "enforced: a cluster driver that cannot be held is still denied", enforced: true, pod: func(p *corev1.Pod) {
			delete(p.Labels, contract.LabelResilient)
			p.Spec.NodeName = "n1"
		}, want: denied, message: `spec.nodeName is set ("n1")`},
		{name: "enforced: a cluster driver with a bad annotation is still denied", enforced: true, pod: func(p *corev1.Pod) {
			delete(p.Labels, contract.LabelResilient)
			p.Annotations = map[string]string{contract.AnnotationMaxRestarts: "many"}
		}, want: denied, message: `driverset.dev/max-restarts="many"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := sparkDriver()
			if tc.pod != nil {
				tc.pod(pod)
			}
			resp := (&Driver{Seal: testSeal(), Enforced: tc.enforced}).Handle(context.Background(), createRequest(encode(t, pod), false))
			if resp.Result == nil || !strings.Contains(resp.Result.Message, tc.message) {
				t.Errorf("message %+v, want one containing %q", resp.Result, tc.message)
			}
			if tc.warning != "" && (len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], tc.warning)) {
				t.Errorf("warnings %q, want one containing %q", resp.Warnings, tc.warning)
			}
			switch tc.want {
			case unchanged:
				if !resp.Allowed || len(resp.Patches) != 0 || resp.PatchType != nil {
					t.Errorf("allowed=%v patches=%v, want allowed unchanged", resp.Allowed, resp.Patches)
				}
			case converted:
				if !resp.Allowed || len(resp.Patches) == 0 {
					t.Fatalf("allowed=%v patches=%v result=%+v, want a patch", resp.Allowed, resp.Patches, resp.Result)
				}
				var got corev1.Pod
				if err := json.Unmarshal(applyPatch(t, encode(t, pod), resp.Patches), &got); err != nil {
					t.Fatal(err)
				}
				if !convert.IsPlaceholder(&got) || len(got.Spec.SchedulingGates) != 1 || got.Spec.SchedulingGates[0].Name != contract.GatePlaceholder {
					t.Errorf("patched pod is not a gated placeholder: labels %v gates %v", got.Labels, got.Spec.SchedulingGates)
				}
			case denied:
				prefix := "driverset cannot take over driver pod jobs/" + pod.Name + ": "
				if resp.Allowed || resp.Result.Code != http.StatusForbidden || !strings.HasPrefix(resp.Result.Message, prefix) {
					t.Errorf("allowed=%v result=%+v, want 403 with a message starting %q", resp.Allowed, resp.Result, prefix)
				}
			}
		})
	}
}

// TestDriverRequests covers requests that are not a well-formed pod CREATE: each gets a proper
// answer, never a panic.
func TestDriverRequests(t *testing.T) {
	good := func(t *testing.T) admission.Request { return createRequest(encode(t, sparkDriver()), false) }
	cases := []struct {
		name    string
		req     func(t *testing.T) admission.Request
		allowed bool
		code    int32
		message string
	}{
		{name: "DELETE", req: func(t *testing.T) admission.Request {
			r := good(t)
			r.Operation, r.OldObject, r.Object = admissionv1.Delete, r.Object, runtime.RawExtension{}
			return r
		}, allowed: true, code: http.StatusOK, message: "CREATE only, not on DELETE"},
		{name: "UPDATE", req: func(t *testing.T) admission.Request {
			r := good(t)
			r.Operation = admissionv1.Update
			return r
		}, allowed: true, code: http.StatusOK, message: "not on UPDATE"},
		{name: "wrong kind", req: func(t *testing.T) admission.Request {
			r := good(t)
			r.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
			r.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}
			return r
		}, allowed: true, code: http.StatusOK, message: "v1 Pods only, not /v1, Kind=ConfigMap configmaps"},
		{name: "a Pod kind on another resource", req: func(t *testing.T) admission.Request {
			r := good(t)
			r.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "bindings"}
			return r
		}, allowed: true, code: http.StatusOK, message: "v1 Pods only, not /v1, Kind=Pod bindings"},
		{name: "pods of another API group", req: func(t *testing.T) admission.Request {
			r := good(t)
			r.Resource = metav1.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "pods"}
			return r
		}, allowed: true, code: http.StatusOK, message: "v1 Pods only, not /v1, Kind=Pod pods.example.com"},
		{name: "pod subresource", req: func(t *testing.T) admission.Request {
			r := good(t)
			r.SubResource = "ephemeralcontainers"
			return r
		}, allowed: true, code: http.StatusOK, message: "pods/ephemeralcontainers"},
		{name: "eviction", req: func(t *testing.T) admission.Request {
			r := good(t)
			r.Kind = metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"}
			r.SubResource = "eviction"
			return r
		}, allowed: true, code: http.StatusOK, message: "Kind=Eviction"},
		{name: "no object", req: func(t *testing.T) admission.Request {
			r := good(t)
			r.Object = runtime.RawExtension{}
			return r
		}, allowed: true, code: http.StatusOK, message: "no pod"},
		{name: "malformed JSON", req: func(t *testing.T) admission.Request {
			r := good(t)
			r.Object.Raw = []byte(`{"metadata": {"labels": ["not", "a", "map"]}}`)
			return r
		}, code: http.StatusBadRequest, message: "could not decode the pod"},
		{name: "truncated JSON", req: func(t *testing.T) admission.Request {
			r := good(t)
			r.Object.Raw = r.Object.Raw[:len(r.Object.Raw)/2]
			return r
		}, code: http.StatusBadRequest, message: "could not decode the pod"},
		// The apiserver refuses a create whose object names another namespace than the request
		// (its URL) before admission, so only a caller's own review carries one: the lookups
		// would read the object's namespace while the request says another.
		{name: "a pod of another namespace than the request's", req: func(t *testing.T) admission.Request {
			r := good(t)
			r.Namespace = "served"
			return r
		}, code: http.StatusBadRequest, message: `is in namespace "jobs", the request in "served"`},
		{name: "not JSON at all", req: func(t *testing.T) admission.Request {
			r := good(t)
			r.Object.Raw = []byte("\x00\x01protobuf?")
			return r
		}, code: http.StatusBadRequest, message: "could not decode the pod"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := (&Driver{Seal: testSeal(), Enforced: true}).Handle(context.Background(), tc.req(t))
			if resp.Allowed != tc.allowed || resp.Result == nil || resp.Result.Code != tc.code ||
				!strings.Contains(resp.Result.Message, tc.message) || len(resp.Patches) != 0 {
				t.Errorf("got allowed=%v result=%+v patches=%v, want allowed=%v code %d message containing %q",
					resp.Allowed, resp.Result, resp.Patches, tc.allowed, tc.code, tc.message)
			}
		})
	}
}

// TestDriverKeepsUnknownFields: a newer apiserver may send fields this build's Go types do not
// know. The patch must touch only what driverset changes, so those fields survive.
func TestDriverKeepsUnknownFields(t *testing.T) {
	var obj map[string]any
	if err := json.Unmarshal(encode(t, sparkDriver()), &obj); err != nil {
		t.Fatal(err)
	}
	spec := obj["spec"].(map[string]any)
	spec["futurePodField"] = map[string]any{"enabled": true}
	spec["containers"].([]any)[0].(map[string]any)["futureContainerField"] = "x"
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	resp := (&Driver{Seal: testSeal()}).Handle(context.Background(), createRequest(raw, false))
	if !resp.Allowed || len(resp.Patches) == 0 {
		t.Fatalf("allowed=%v patches=%v, want converted", resp.Allowed, resp.Patches)
	}
	for _, op := range resp.Patches {
		if op.Operation == "remove" || strings.Contains(op.Path, "future") {
			t.Errorf("patch op %s %s touches what driverset did not change", op.Operation, op.Path)
		}
	}
	patched := string(applyPatch(t, raw, resp.Patches))
	for _, field := range []string{`"futurePodField":{"enabled":true}`, `"futureContainerField":"x"`} {
		if !strings.Contains(patched, field) {
			t.Errorf("patched pod lost %s:\n%s", field, patched)
		}
	}
}

// TestDefaultIsTheDecision: Default alone (kubebuilder style) converts, leaves alone, or returns a
// *convert.NotConvertible.
func TestDefaultIsTheDecision(t *testing.T) {
	pod := sparkDriver()
	if err := (&Driver{Seal: testSeal()}).Default(context.Background(), pod); err != nil || !convert.IsPlaceholder(pod) {
		t.Errorf("Default: err=%v placeholder=%v, want a placeholder", err, convert.IsPlaceholder(pod))
	}
	executor := sparkDriver()
	executor.Labels[contract.LabelSparkRole] = contract.RoleExecutor
	want := executor.DeepCopy()
	if err := (&Driver{Seal: testSeal(), Enforced: true}).Default(context.Background(), executor); err != nil || !equalJSON(t, executor, want) {
		t.Errorf("Default changed an executor pod (err=%v)", err)
	}
	bad := sparkDriver()
	bad.Spec.NodeName = "node-1"
	err := (&Driver{Seal: testSeal()}).Default(context.Background(), bad)
	var nc *convert.NotConvertible
	if !errors.As(err, &nc) || !strings.Contains(nc.Reason, "spec.nodeName is set") {
		t.Errorf("Default on a pod with nodeName: %v, want a *convert.NotConvertible about nodeName", err)
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	x, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(x) == string(y)
}
