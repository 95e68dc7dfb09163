package controller

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/seal"
)

// What the caches keep of a pod does not grow with what the pod carries: of its metadata only
// driverset's labels and annotations, and of a pod still larger than any driverset makes, only
// its name and those labels. Each row is one pod, through both transforms.
func TestCachedPodsAreBounded(t *testing.T) {
	ours := map[string]string{contract.LabelDriver: "app", contract.LabelSparkRole: contract.RoleExecutor, contract.LabelSparkAppSelector: "spark-1"}
	pod := func(edit func(p *corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", Labels: map[string]string{}, Annotations: map[string]string{}},
			Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Command: []string{"/bin/c"}, Args: []string{"driver"}}}},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		}
		for k, v := range ours {
			p.Labels[k] = v
		}
		edit(p)
		return p
	}
	big := strings.Repeat("x", cacheBudget)
	neither, both := map[string]bool{}, map[string]bool{"driver pod": true, "placeholder": true}
	driverPodOnly := map[string]bool{"driver pod": true}
	cases := []struct {
		name   string
		pod    *corev1.Pod
		labels map[string]string // what is kept
		annots map[string]string
		// stub is whether each transform keeps a stub: the placeholder cache keeps no command and
		// no tolerations, so those cannot make it grow.
		stub map[string]bool
	}{
		{"a pod as driverset makes it keeps driverset's marks", pod(func(p *corev1.Pod) {
			p.Annotations[contract.AnnotationRestarts] = "1"
			p.Annotations[seal.Annotation] = "v1.1.abc"
		}), ours, map[string]string{contract.AnnotationRestarts: "1", seal.Annotation: "v1.1.abc"}, neither},
		{"the owner's own labels and annotations, however many, are not kept", pod(func(p *corev1.Pod) {
			for i := range 2000 {
				p.Labels[fmt.Sprintf("team.example/%d", i)] = "x"
			}
			p.Annotations["tool.example/notes"] = big
		}), ours, nil, neither},
		{"an annotation of driverset's that is too large makes a stub", pod(func(p *corev1.Pod) {
			p.Annotations[contract.AnnotationResources] = big
		}), ours, nil, both},
		{"a long command makes a stub", pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Command = []string{big}
		}), ours, nil, driverPodOnly},
		{"many finalizers make a stub", pod(func(p *corev1.Pod) {
			for i := range cacheBudget / 16 {
				p.Finalizers = append(p.Finalizers, fmt.Sprintf("f.example/%06d", i))
			}
		}), ours, nil, both},
		{"many tolerations make a stub", pod(func(p *corev1.Pod) {
			for i := range cacheBudget / 16 {
				p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: fmt.Sprintf("t.example/%06d", i), Operator: corev1.TolerationOpExists})
			}
		}), ours, nil, driverPodOnly},
		{"many owner references make a stub", pod(func(p *corev1.Pod) {
			for i := range cacheBudget / 8 {
				p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: fmt.Sprintf("o-%06d", i), UID: "u"})
			}
		}), ours, nil, both},
	}
	for _, tc := range cases {
		for name, transform := range map[string]func(any) (any, error){"driver pod": driverPodTransform, "placeholder": placeholderTransform} {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				out, err := transform(tc.pod.DeepCopy())
				if err != nil {
					t.Fatal(err)
				}
				got := out.(*corev1.Pod)
				if !reflect.DeepEqual(got.Labels, tc.labels) || !reflect.DeepEqual(got.Annotations, tc.annots) {
					t.Errorf("kept labels %v and annotations %v, want %v and %v", got.Labels, abbreviated(got.Annotations), tc.labels, tc.annots)
				}
				if stub := got.Spec.NodeName == ""; stub != tc.stub[name] {
					t.Errorf("a stub: %v, want %v (kept %d bytes, budget %d)", stub, tc.stub[name], keptSize(got), cacheBudget)
				}
				if got.Name != "p" || got.Namespace != "ns" || got.UID != "u" {
					t.Errorf("lost the pod's identity: %s/%s %s", got.Namespace, got.Name, got.UID)
				}
				if n := keptSize(got); n > cacheBudget {
					t.Errorf("kept %d bytes, over the budget of %d", n, cacheBudget)
				}
			})
		}
	}
}

// The budget is inclusive: a pod at it is kept whole, one byte more makes a stub.
func TestCacheBudgetEdge(t *testing.T) {
	at := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{contract.AnnotationResources: ""}}}
	at.Annotations[contract.AnnotationResources] = strings.Repeat("x", cacheBudget-len(contract.AnnotationResources))
	if got := bounded(at); got != at {
		t.Errorf("a pod of exactly %d bytes was cut", keptSize(at))
	}
	over := at.DeepCopy()
	over.Annotations[contract.AnnotationResources] += "x"
	if got := bounded(over); got == over || got.Annotations != nil {
		t.Errorf("a pod of %d bytes was kept", keptSize(over))
	}
}

func abbreviated(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if len(v) > 20 {
			v = v[:20] + "…"
		}
		out[k] = v
	}
	return out
}

// Every label the caches select by, or the controller lists cached pods by, is kept: a cut label
// would drop its pods from those lists without an error.
func TestKeepOursKeepsTheSelectedLabels(t *testing.T) {
	selected := map[string]string{
		contract.LabelDriver: "app", contract.LabelPlaceholder: "true", // the caches' selectors
		contract.LabelSparkAppSelector: "spark-1", contract.LabelSparkRole: contract.RoleExecutor, // executorsOf, the incarnation gate
		contract.LabelHeartbeat: "true", // the Lease cache's selector
	}
	m := metav1.ObjectMeta{Labels: map[string]string{"other.example/x": "y"}}
	for k, v := range selected {
		m.Labels[k] = v
	}
	keepOurs(&m)
	if !reflect.DeepEqual(m.Labels, selected) {
		t.Errorf("kept %v, want %v", m.Labels, selected)
	}
}
