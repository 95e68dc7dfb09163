package controller

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/seal"
	"github.com/driverset/driverset/webhook"
)

// The creates webhook admits what Built returns; the controller creates what create builds. They
// are one builder, and deterministic: what Built says before the create, and again after it, is
// what the controller sent, for an app with every input the builder reads (a LimitRange floor, a
// self-fence T, remembered settings).
func TestBuiltIsWhatTheControllerCreates(t *testing.T) {
	floor := &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "floor", Namespace: "analytics"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			Min: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}},
	}
	for name, annotations := range map[string]map[string]string{
		"plain":                           nil,
		"self-fencing, with its settings": {contract.AnnotationSelfFence: "1m", contract.AnnotationMaxRestarts: "5"},
	} {
		t.Run(name, func(t *testing.T) {
			h := newCluster(t, annotations, nil, floor)
			before, beforeSts, refusal, err := h.r.Built(h.ctx, h.placeholder())
			if err != nil || refusal != "" {
				t.Fatalf("Built: %q, %v", refusal, err)
			}
			h.reconcile()
			if len(h.created) != 2 {
				t.Fatalf("created %v, want the Service and the StatefulSet", h.creates)
			}
			svc, sts := h.created[0].(*corev1.Service), h.created[1].(*appsv1.StatefulSet)
			if d := webhook.ServiceAsBuilt(svc, before); d != "" {
				t.Errorf("the Service created is not what Built said: %s", d)
			}
			if d := webhook.StatefulSetAsBuilt(sts, beforeSts); d != "" {
				t.Errorf("the StatefulSet created is not what Built said: %s", d)
			}
			if got := sts.Spec.Template.Spec.InitContainers[0].Resources.Limits.Memory(); got.String() != "64Mi" {
				t.Errorf("the init container's memory %s, want the LimitRange's floor 64Mi", got)
			}
			_, after, refusal, err := h.r.Built(h.ctx, h.placeholder())
			if err != nil || refusal != "" {
				t.Fatalf("Built after the create: %q, %v", refusal, err)
			}
			if d := webhook.StatefulSetAsBuilt(sts, after); d != "" {
				t.Errorf("Built after the create differs: %s", d)
			}
		})
	}
}

// Built refuses what the controller would build nothing from, and says why.
func TestBuiltRefuses(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(p *corev1.Pod)
		reason string
	}{
		{"a pod that is not a placeholder", func(p *corev1.Pod) {
			delete(p.Labels, contract.LabelPlaceholder)
			delete(p.Annotations, contract.AnnotationResources)
		}, "is not a driverset placeholder"},
		{"a placeholder without a seal", func(p *corev1.Pod) { delete(p.Annotations, seal.Annotation) }, "has no seal"},
		{"a placeholder whose recorded resources were edited", func(p *corev1.Pod) {
			p.Annotations[contract.AnnotationResources] = `{"spark-kubernetes-driver":{"limits":{"nvidia.com/gpu":"8"}}}`
		}, "does not match"},
		{"a placeholder being deleted", func(p *corev1.Pod) {
			p.DeletionTimestamp = &metav1.Time{Time: t0.Add(time.Minute)}
		}, "being deleted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newCluster(t, nil, nil)
			p := h.placeholder()
			tc.edit(p)
			svc, sts, refusal, err := h.r.Built(h.ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if svc != nil || sts != nil || !strings.Contains(refusal, tc.reason) {
				t.Fatalf("built %v %v, refusal %q; want nothing and %q", svc != nil, sts != nil, refusal, tc.reason)
			}
		})
	}
}
