package controller

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

func labelled(name string, l map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: l}}
}

// The two caches select the pods driverset acts on, and no other Spark pod.
func TestCacheSelectors(t *testing.T) {
	var main labels.Selector
	for o, b := range CacheOptions().ByObject {
		if _, ok := o.(*corev1.Pod); ok {
			main = b.Label
		}
	}
	var placeholders labels.Selector
	for o, b := range PlaceholderCacheOptions().ByObject {
		if _, ok := o.(*corev1.Pod); ok {
			placeholders = b.Label
		}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		cached bool
	}{
		{"placeholder", map[string]string{contract.LabelPlaceholder: "true", contract.LabelSparkRole: contract.RoleDriver}, true},
		{"S-0", map[string]string{contract.LabelDriver: "app", contract.LabelSparkRole: contract.RoleDriver}, true},
		{"executor tied to S-0", map[string]string{contract.LabelDriver: "app", contract.LabelSparkRole: contract.RoleExecutor}, true},
		{"foreign driver", map[string]string{contract.LabelSparkRole: contract.RoleDriver, contract.LabelSparkAppSelector: "x"}, false},
		{"foreign executor", map[string]string{contract.LabelSparkRole: contract.RoleExecutor, contract.LabelSparkAppSelector: "x"}, false},
		{"opted-in driver before the webhook", map[string]string{contract.LabelSparkRole: contract.RoleDriver, contract.LabelResilient: "true"}, false},
	} {
		set := labels.Set(c.labels)
		if got := main.Matches(set) || placeholders.Matches(set); got != c.cached {
			t.Errorf("%s: cached %v, want %v", c.name, got, c.cached)
		}
	}
	if CacheOptions().DefaultTransform == nil || PlaceholderCacheOptions().DefaultTransform == nil {
		t.Error("managedFields are kept: want a transform that strips them")
	}
}

// Pods reads the two caches as one.
func TestPodsReadsBothCaches(t *testing.T) {
	ctx := context.Background()
	s0 := labelled("app-0", map[string]string{contract.LabelDriver: "app"})
	p := labelled("app", map[string]string{contract.LabelPlaceholder: "true"})
	main := fake.NewClientBuilder().WithObjects(s0).Build()
	r := Pods{Main: main, Placeholders: fake.NewClientBuilder().WithObjects(p).Build()}
	for _, name := range []string{"app-0", "app"} {
		if err := r.Get(ctx, types.NamespacedName{Namespace: "ns", Name: name}, &corev1.Pod{}); err != nil {
			t.Errorf("get pod %s: %v", name, err)
		}
	}
	if err := r.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "other"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("get a pod in neither: %v, want NotFound", err)
	}
	var list corev1.PodList
	if err := r.List(ctx, &list, client.InNamespace("ns")); err != nil || len(list.Items) != 2 {
		t.Errorf("list: %d pods (%v), want both", len(list.Items), err)
	}
	// Other kinds come from the manager's cache alone.
	if err := main.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h"}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "h"}, &corev1.Service{}); err != nil {
		t.Errorf("get a Service: %v", err)
	}
}

// The manager's cache keeps of a driver pod what the controller reads from it: each function that
// reads a cached S-0 or executor answers the same for the pod as transformed as for the pod whole.
func TestDriverPodTransformKeepsWhatIsRead(t *testing.T) {
	whole := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "d-0", Namespace: "ns", UID: "u1", Labels: map[string]string{contract.LabelDriver: "d"}},
		Spec: corev1.PodSpec{
			NodeName:        "node-a",
			SchedulingGates: []corev1.PodSchedulingGate{{Name: contract.GateStaleExecutors}},
			Tolerations:     []corev1.Toleration{{Key: TaintOutOfService, Operator: corev1.TolerationOpExists}},
			InitContainers:  []corev1.Container{{Name: "driverset-install", Image: "driverset", Command: []string{"/driverset", "copy-binary"}}},
			Containers: []corev1.Container{{
				Name: "spark-kubernetes-driver", Image: "apache/spark:3.5.3",
				Command: []string{"/opt/driverset/bin/driverset", "wrap", "--heartbeat-lease", "d-0-heartbeat", "--self-fence", "90s", "--", "/opt/entrypoint.sh"},
				Args:    []string{"driver", "--properties-file", "/opt/spark/conf/spark.properties"},
				Env:     []corev1.EnvVar{{Name: "SPARK_APPLICATION_ID", Value: "spark-1"}},
			}},
			Volumes: []corev1.Volume{{Name: "spark-conf-volume-driver"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
			Name:  "spark-kubernetes-driver",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "driverset: exit 1"}},
		}}},
	}
	out, err := driverPodTransform(whole.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	cut := out.(*corev1.Pod)
	if len(cut.Spec.Volumes) != 0 || len(cut.Spec.Containers[0].Env) != 0 || len(cut.Spec.InitContainers) != 0 {
		t.Errorf("kept what no one reads: %+v", cut.Spec)
	}
	node := nodeWith(corev1.ConditionUnknown, t0, corev1.Taint{Key: TaintOutOfService, Effect: corev1.TaintEffectNoExecute})
	const c = "spark-kubernetes-driver"
	for _, read := range []struct {
		what string
		of   func(p *corev1.Pod) any
	}{
		{"heartbeatFlags", func(p *corev1.Pod) any { l, t := heartbeatFlags(p, c); return fmt.Sprint(l, t) }},
		{"provenDown (tolerations)", func(p *corev1.Pod) any { return provenDown(p, node) }},
		{"the stale-executor gate", func(p *corev1.Pod) any { return convert.HasGate(&p.Spec, contract.GateStaleExecutors) }},
		{"outcomeOf", func(p *corev1.Pod) any { return outcomeOf(p, c) }},
		{"the node", func(p *corev1.Pod) any { return p.Spec.NodeName }},
		{"driverNode (index)", func(p *corev1.Pod) any { return driverNode(p) }},
		{"deadAndAvoided (tolerations)", func(p *corev1.Pod) any { return deadAndAvoided(node, p.Spec.Tolerations) }},
	} {
		if got, want := read.of(cut), read.of(whole); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v from the cached pod, %v from the whole pod", read.what, got, want)
		}
	}
}

// TestPlaceholderTransformKeepsWhatIsRead: the placeholder cache keeps what a reconcile reads of a
// placeholder, and not the rest of a Spark driver's spec (built into S-0 from the live pod).
func TestPlaceholderTransformKeepsWhatIsRead(t *testing.T) {
	whole := sparkDriverPod(t, map[string]string{contract.AnnotationMaxRestarts: "2"})
	if err := convert.ToPlaceholder(whole); err != nil {
		t.Fatal(err)
	}
	if err := testSeal().Sign(whole, "alice"); err != nil {
		t.Fatal(err)
	}
	whole.CreationTimestamp = metav1.NewTime(time.Now())
	whole.Spec.Volumes = append(whole.Spec.Volumes, corev1.Volume{Name: "data",
		VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pi-driver-pvc-0"}}})
	whole.Status = corev1.PodStatus{Phase: corev1.PodRunning, Message: "driverset: running"}
	out, err := placeholderTransform(whole.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	cut := out.(*corev1.Pod)
	if len(cut.Spec.Volumes) != 1 || len(cut.Spec.Containers[0].Env) != 0 || cut.Spec.Containers[0].Resources.Size() != 0 {
		t.Errorf("kept what no one reads: %+v", cut.Spec)
	}
	for _, read := range []struct {
		what string
		of   func(p *corev1.Pod) any
	}{
		{"IsPlaceholder", func(p *corev1.Pod) any { return convert.IsPlaceholder(p) }},
		{"the driver container", func(p *corev1.Pod) any { return driverContainer(p) }},
		{"the placeholder gate", func(p *corev1.Pod) any { return convert.HasGate(&p.Spec, contract.GatePlaceholder) }},
		{"the claims kept", func(p *corev1.Pod) any { return convert.DriverClaims(p) }},
		{"the seal", func(p *corev1.Pod) any { return fmt.Sprint(testSeal().Verify(p, p.CreationTimestamp.Time)) }},
		{"the settings", func(p *corev1.Pod) any { s, w := effectiveSettings(p.Annotations, nil, 0); return fmt.Sprint(s, w) }},
		{"the status", func(p *corev1.Pod) any { return p.Status }},
	} {
		if got, want := read.of(cut), read.of(whole); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v from the cached pod, %v from the whole pod", read.what, got, want)
		}
	}
}
