//go:build testbed

package testbed

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Images are never pulled on KWOK nodes; an unresolvable name proves it.
const testImage = "registry.invalid/pause:never-pulled"

// newNamespace makes a namespace for one scenario and waits until pods can be created in it.
func newNamespace(t *testing.T, c *Cluster, prefix string) string {
	t.Helper()
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + rand.String(5)}}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitForDefaultServiceAccount(ctx, ns.Name); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// addNodes adds fresh nodes for one scenario, so that a node it kills hurts nobody else.
func addNodes(t *testing.T, c *Cluster, names ...string) {
	t.Helper()
	start := time.Now()
	for _, n := range names {
		if err := c.AddNode(t.Context(), n); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("nodes %v Ready in %.1fs", names, time.Since(start).Seconds())
}

// newStatefulSet is a plain StatefulSet of one replica whose pod may run only on nodes.
func newStatefulSet(name string, nodes []string) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    new(int32(1)),
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "main", Image: testImage}},
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
							NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
								Key: labelHostname, Operator: corev1.NodeSelectorOpIn, Values: nodes,
							}}}},
						},
					}},
				},
			},
		},
	}
}

// podRunning: Running, Ready, not being deleted.
func podRunning(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pods lists the pods of app `app` in ns.
func pods(ctx context.Context, c *Cluster, ns, app string) ([]corev1.Pod, error) {
	l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// waitForPod polls the app's pods until one satisfies ok, and returns it.
func waitForPod(t *testing.T, c *Cluster, ns, app string, timeout time.Duration, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var found *corev1.Pod
	var seen []corev1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		ps, err := pods(ctx, c, ns, app)
		if err != nil {
			return false, nil
		}
		seen = ps
		for i := range ps {
			if ok(&ps[i]) {
				found = &ps[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("waiting %v for %s: %v; pods: %s", timeout, what, err, describePods(seen))
	}
	return found
}

func describePods(ps []corev1.Pod) string {
	s := "["
	for _, p := range ps {
		s += fmt.Sprintf("{%s uid=%s node=%s phase=%s deleting=%v} ", p.Name, p.UID, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil)
	}
	return s + "]"
}

func waitForNodeReady(t *testing.T, c *Cluster, node string, want corev1.ConditionStatus, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return NodeReady(n) == want, nil
	})
	if err != nil {
		t.Fatalf("node %s never became Ready=%s in %v", node, want, timeout)
	}
}

func other(nodes []string, not string) string {
	for _, n := range nodes {
		if n != not {
			return n
		}
	}
	return ""
}
