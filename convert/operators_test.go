package convert

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// TestCheckOwners is the owner rule: a driver pod owned by anything but a Pod is an operator's or
// another controller's (controller or not), not spark-submit's, and driverset does not take it
// over; the Spark operators' own shapes are in webhook/testdata.
func TestCheckOwners(t *testing.T) {
	ref := func(apiVersion, kind, name string, controller *bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("u-" + name), Controller: controller}
	}
	cases := []struct {
		name   string
		owners []metav1.OwnerReference
		labels map[string]string
		reason string // "" = convertible; else a part of the reason, which is always NotSparkSubmit
	}{
		{name: "no owner: spark-submit's own pod"},
		{name: "a Pod, not its controller: the pod spark-submit ran in, named by a pod template",
			owners: []metav1.OwnerReference{ref("v1", "Pod", "jupyter-0", nil)}},
		{name: "a Pod with controller false", owners: []metav1.OwnerReference{ref("v1", "Pod", "jupyter-0", ptr.To(false))}},
		{name: "a Pod as its controller is still refused",
			owners: []metav1.OwnerReference{ref("v1", "Pod", "jupyter-0", ptr.To(true))},
			reason: `it is already controlled by Pod "jupyter-0"`},
		{name: "apache/spark-kubernetes-operator: its SparkApplication, not as controller",
			owners: []metav1.OwnerReference{ref("spark.apache.org/v1", "SparkApplication", "pi", nil)},
			reason: `it is owned by SparkApplication "pi" (spark.apache.org/v1), not by a pod`},
		{name: "kubeflow spark-operator from v2.4: its SparkApplication as controller",
			owners: []metav1.OwnerReference{ref("sparkoperator.k8s.io/v1beta2", "SparkApplication", "pi", ptr.To(true))},
			reason: `it is controlled by SparkApplication "pi" (sparkoperator.k8s.io/v1beta2), not by a pod`},
		{name: "a Job as controller", owners: []metav1.OwnerReference{ref("batch/v1", "Job", "nightly", ptr.To(true))},
			reason: `it is controlled by Job "nightly" (batch/v1), not by a pod`},
		{name: "a ConfigMap, not as controller", owners: []metav1.OwnerReference{ref("v1", "ConfigMap", "x", ptr.To(false))},
			reason: `it is owned by ConfigMap "x" (v1), not by a pod`},
		{name: "a Pod of another API group is no Pod", owners: []metav1.OwnerReference{ref("example.com/v1", "Pod", "pod-like", nil)},
			reason: `it is owned by Pod "pod-like" (example.com/v1), not by a pod`},
		{name: "a Pod and an operator: the operator is named",
			owners: []metav1.OwnerReference{ref("v1", "Pod", "jupyter-0", nil), ref("spark.apache.org/v1", "SparkApplication", "pi", nil)},
			reason: `owned by SparkApplication "pi"`},
		{name: "a Pod as controller and an operator: the operator is named",
			owners: []metav1.OwnerReference{ref("v1", "Pod", "jupyter-0", ptr.To(true)), ref("spark.apache.org/v1", "SparkApplication", "pi", nil)},
			reason: `owned by SparkApplication "pi"`},
		{name: "an operator's controller is named before its other owners",
			owners: []metav1.OwnerReference{ref("v1", "ConfigMap", "x", nil), ref("sparkoperator.k8s.io/v1beta2", "SparkApplication", "pi", ptr.To(true))},
			reason: `controlled by SparkApplication "pi"`},
		{name: "kubeflow spark-operator up to v2.3: its label, before its webhook adds the owner",
			labels: map[string]string{"sparkoperator.k8s.io/launched-by-spark-operator": "true", "sparkoperator.k8s.io/app-name": "pi"},
			reason: `it is labelled sparkoperator.k8s.io/launched-by-spark-operator=true: a driver of the Kubeflow Spark operator`},
		{name: "kubeflow's label with another value is not its mark",
			labels: map[string]string{"sparkoperator.k8s.io/launched-by-spark-operator": "false"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := driverPod()
			pod.OwnerReferences = tc.owners
			for k, v := range tc.labels {
				pod.Labels[k] = v
			}
			nc, _ := checkGives(t, pod, tc.reason)
			if nc == nil {
				return
			}
			if !nc.NotSparkSubmit {
				t.Errorf("reason %q is not NotSparkSubmit: the namespace policy would refuse an operator's driver", nc.Reason)
			}
		})
	}
}

// TestOperatorReasonSaysWhatToDo: the refusal of an operator's driver names the owner and tells the
// user both ways out, without a word that only fits one of driverset's two entries.
func TestOperatorReasonSaysWhatToDo(t *testing.T) {
	pod := driverPod()
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "spark.apache.org/v1", Kind: "SparkApplication", Name: "pi", UID: "u"}}
	err := Check(pod)
	if err == nil {
		t.Fatal("Check: nil, want the operator's driver refused")
	}
	for _, want := range []string{
		"tracks and deletes this pod itself",
		"driverset does not take over such drivers yet",
		"without the label driverset.dev/resilient=true",
		"or submit the app with spark-submit",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err.Error(), want)
		}
	}
}

// TestStatefulSetRefusesAnOperatorsPlaceholder: the controller builds no S for a placeholder that
// an operator came to own after admission (or that an older driverset admitted).
func TestStatefulSetRefusesAnOperatorsPlaceholder(t *testing.T) {
	p := persisted(driverPod())
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "spark.apache.org/v1", Kind: "SparkApplication", Name: "pi", UID: "u"}}
	if _, err := StatefulSet(p, testOptions); err == nil || !strings.Contains(err.Error(), `owned by SparkApplication "pi"`) {
		t.Errorf("StatefulSet: %v, want it refused for its SparkApplication owner", err)
	}
}
