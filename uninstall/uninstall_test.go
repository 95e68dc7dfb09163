package uninstall

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/driverset/driverset/contract"
)

const outcome = contract.FinalizerOutcome

func sts(ns, name string, labelled bool, strategy appsv1.StatefulSetUpdateStrategyType, fin ...string) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "7", Labels: map[string]string{}}}
	if labelled {
		s.Labels[contract.LabelDriver] = name
	}
	s.Spec.UpdateStrategy.Type = strategy
	s.Spec.Template.Finalizers = fin
	s.Spec.Template.Labels = map[string]string{"keep": "me"}
	return s
}

func pod(ns, name string, labels map[string]string, deleting bool, fin ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "3", Labels: labels, Finalizers: fin}}
	if deleting {
		p.DeletionTimestamp = &metav1.Time{}
	}
	return p
}

var (
	driver      = map[string]string{contract.LabelDriver: "app-driver-ds", contract.LabelSparkRole: contract.RoleDriver}
	placeholder = map[string]string{contract.LabelPlaceholder: "true", contract.LabelSparkRole: contract.RoleDriver}
	other       = map[string]string{contract.LabelSparkRole: contract.RoleDriver}
)

// objects is the cluster each case starts from: a driver app in ns a (its StatefulSet, a
// Terminating S-0 and its placeholder), a running driver in ns b, and what is not driverset's.
func objects() []runtime.Object {
	return []runtime.Object{
		sts("a", "app-driver-ds", true, appsv1.OnDeleteStatefulSetStrategyType, "example.com/keep", outcome),
		sts("b", "run-driver-ds", true, appsv1.OnDeleteStatefulSetStrategyType, outcome),
		sts("a", "rolling", true, appsv1.RollingUpdateStatefulSetStrategyType, outcome),
		sts("a", "not-ours", false, appsv1.OnDeleteStatefulSetStrategyType, outcome),
		pod("a", "app-driver-ds-0", driver, true, outcome, "example.com/keep"),
		pod("a", "app-driver", placeholder, true, outcome),
		pod("b", "run-driver-ds-0", driver, false, outcome),
		pod("b", "run-driver", placeholder, false, outcome),
		pod("a", "stranger", other, true, outcome),
		pod("a", "app-exec-1", map[string]string{contract.LabelDriver: "app-driver-ds"}, true, "example.com/keep"),
	}
}

func finalizers(t *testing.T, c *fake.Clientset, kind, ns, name string) []string {
	t.Helper()
	ctx := context.Background()
	if kind == "StatefulSet" {
		s, err := c.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Spec.Template.Labels["keep"] != "me" {
			t.Errorf("%s/%s: template labels changed: %v", ns, name, s.Spec.Template.Labels)
		}
		return s.Spec.Template.Finalizers
	}
	p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Finalizers
}

func TestRun(t *testing.T) {
	// released: the objects whose finalizer is gone afterwards; every other object keeps its own.
	all := []string{"StatefulSet a/app-driver-ds", "StatefulSet b/run-driver-ds", "Pod a/app-driver-ds-0",
		"Pod a/app-driver", "Pod b/run-driver-ds-0", "Pod b/run-driver"}
	cases := []struct {
		name     string
		o        Options
		released []string
		report   []string
	}{
		{"uninstall: every template and every driverset pod, running or not", Options{}, all,
			append(slices.Clone(all), "StatefulSet a/rolling left alone")},
		{"uninstall in one namespace", Options{Namespaces: []string{"b"}},
			[]string{"StatefulSet b/run-driver-ds", "Pod b/run-driver-ds-0", "Pod b/run-driver"},
			[]string{"StatefulSet b/run-driver-ds", "Pod b/run-driver-ds-0", "Pod b/run-driver"}},
		{"drain while down: only pods being deleted, templates kept", Options{TerminatingOnly: true},
			[]string{"Pod a/app-driver-ds-0", "Pod a/app-driver"},
			[]string{"Pod a/app-driver-ds-0", "Pod a/app-driver"}},
		{"dry run changes nothing and reports the same", Options{DryRun: true}, nil,
			append(slices.Clone(all), "StatefulSet a/rolling left alone")},
	}
	everything := []string{"StatefulSet a/app-driver-ds", "StatefulSet b/run-driver-ds", "StatefulSet a/rolling",
		"StatefulSet a/not-ours", "Pod a/app-driver-ds-0", "Pod a/app-driver", "Pod b/run-driver-ds-0",
		"Pod b/run-driver", "Pod a/stranger", "Pod a/app-exec-1"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(objects()...)
			acts, err := Run(context.Background(), c, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			got := reportKeys(acts)
			if !slices.Equal(sorted(got), sorted(tc.report)) {
				t.Errorf("report = %v, want %v", got, tc.report)
			}
			for _, key := range everything {
				kind, nsName, _ := strings.Cut(key, " ")
				ns, name, _ := strings.Cut(nsName, "/")
				fin := finalizers(t, c, kind, ns, name)
				// The executor never had it: nothing to release, nothing added.
				want := key != "Pod a/app-exec-1" && !slices.Contains(tc.released, key)
				if has := slices.Contains(fin, outcome); has != want {
					t.Errorf("%s: has the finalizer %v, want %v (finalizers %v)", key, has, want, fin)
				}
				if key == "Pod a/app-driver-ds-0" || key == "StatefulSet a/app-driver-ds" || key == "Pod a/app-exec-1" {
					if !slices.Contains(fin, "example.com/keep") {
						t.Errorf("%s: another finalizer was removed: %v", key, fin)
					}
				}
			}
			if tc.o.DryRun {
				return
			}
			again, err := Run(context.Background(), c, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range again {
				if a.Skipped == "" {
					t.Errorf("a second run changed %v: not idempotent", a)
				}
			}
		})
	}
}

func reportKeys(acts []Action) []string {
	var out []string
	for _, a := range acts {
		k := a.Kind + " " + a.Namespace + "/" + a.Name
		if a.Skipped != "" {
			k += " left alone"
		}
		out = append(out, k)
	}
	return out
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// A writer between the list and the patch: the patch's tests fail and the object is read again,
// its finalizer then found at its new index; whatever the writer added stays.
func TestRunConcurrentWriter(t *testing.T) {
	cases := []struct {
		name   string
		fail   error
		change bool
	}{
		{"a resourceVersion conflict", apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "app-driver-ds-0", nil), false},
		{"a failed test operation (422)", apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "app-driver-ds-0", nil), false},
		{"a finalizer added before driverset's", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(pod("a", "app-driver-ds-0", driver, true, outcome))
			patches := 0
			c.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				patches++
				if patches > 1 {
					return false, nil, nil
				}
				if tc.change {
					p := pod("a", "app-driver-ds-0", driver, true, "example.com/first", outcome)
					p.ResourceVersion = "4"
					if err := c.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, p, "a"); err != nil {
						t.Fatal(err)
					}
					// The stale patch now fails its resourceVersion test: the apiserver's answer is 422.
					return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "app-driver-ds-0", nil)
				}
				return true, nil, tc.fail
			})
			acts, err := Run(context.Background(), c, Options{TerminatingOnly: true})
			if err != nil {
				t.Fatalf("Run: %v (patches %d)", err, patches)
			}
			if patches != 2 || len(acts) != 1 {
				t.Errorf("patches %d, report %v: want one retry, one pod released", patches, acts)
			}
			fin := finalizers(t, c, "Pod", "a", "app-driver-ds-0")
			if slices.Contains(fin, outcome) || (tc.change && !slices.Equal(fin, []string{"example.com/first"})) {
				t.Errorf("finalizers %v", fin)
			}
		})
	}
}

// Lists are read a page at a time (executors carry the driver label too, and are many): a pod on
// the second page is released as well.
func TestRunReadsEveryPage(t *testing.T) {
	first, second := pod("a", "one-driver-0", driver, true, outcome), pod("a", "two-driver-0", driver, true, outcome)
	c := fake.NewClientset(first, second)
	var limits []int64
	c.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		opts := a.(k8stesting.ListActionImpl).ListOptions
		if opts.LabelSelector != contract.LabelDriver {
			return true, &corev1.PodList{}, nil
		}
		limits = append(limits, opts.Limit)
		if opts.Continue == "" {
			return true, &corev1.PodList{ListMeta: metav1.ListMeta{Continue: "page-2"}, Items: []corev1.Pod{*first}}, nil
		}
		return true, &corev1.PodList{Items: []corev1.Pod{*second}}, nil
	})
	acts, err := Run(context.Background(), c, Options{TerminatingOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := reportKeys(acts); !slices.Equal(got, []string{"Pod a/one-driver-0", "Pod a/two-driver-0"}) {
		t.Errorf("released %v, want both pages' pods", got)
	}
	if !slices.Equal(limits, []int64{500, 500}) {
		t.Errorf("list limits %v, want two pages of 500", limits)
	}
}
