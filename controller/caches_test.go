package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/driverset/driverset/contract"
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
