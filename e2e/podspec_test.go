//go:build testbed

package e2e

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// Real-world driver pod templates: what users put in spark.kubernetes.driver.podTemplateFile
// reaches the StatefulSet's pod, and the driver runs.

// A Spark 3.5 driver that spreads drivers with matchLabelKeys and keeps apart from its
// executors with pod (anti-)affinity label keys: the apiserver merges those keys into the
// placeholder's selectors, and S-0 must not get them merged twice (which the apiserver refuses).
func TestDriverWithMatchLabelKeysRuns(t *testing.T) {
	ns := namespace(t, nil)
	key := contract.LabelSparkAppSelector
	s := submitEdited(t, app(ns, "spread"), func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{contract.LabelSparkRole: contract.RoleDriver}},
			MatchLabelKeys: []string{key},
		}}
		p.Spec.Affinity = &corev1.Affinity{
			PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{
					TopologyKey:    "kubernetes.io/hostname",
					LabelSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{contract.LabelSparkRole: contract.RoleExecutor}},
					MatchLabelKeys: []string{key},
				},
			}}},
			PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{
					TopologyKey:       "kubernetes.io/hostname",
					LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{contract.LabelSparkRole: contract.RoleDriver}},
					MismatchLabelKeys: []string{key},
				},
			}}},
		}
	})
	p := getPod(t, ns, s.plan.DriverPodName)
	if got := p.Spec.TopologySpreadConstraints[0].LabelSelector.MatchExpressions; len(got) == 0 {
		t.Errorf("the apiserver did not merge matchLabelKeys into the placeholder's selector: this test no longer covers the case")
	}
	runningDriverWithin(t, 60*time.Second, ns, contract.NamesFor(p.Name), "")
	sts := getStatefulSet(t, ns, contract.NamesFor(p.Name).StatefulSet)
	if got := sts.Spec.Template.Spec.TopologySpreadConstraints[0].LabelSelector.MatchExpressions; len(got) != 0 {
		t.Errorf("the StatefulSet's template carries the merged selector %v", got)
	}
}

// A driver submitted with another controller's scheduling gate (Kueue, Volcano, a user's own):
// that controller lifts it on the placeholder or not at all, never on S-0, so S-0 must not carry
// it, or the driver never runs.
func TestForeignGateStaysOnThePlaceholder(t *testing.T) {
	ns := namespace(t, nil)
	const gate = "example.com/admission"
	s := submitEdited(t, app(ns, "gated"), func(p *corev1.Pod) {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: gate}}
	})
	names := contract.NamesFor(s.plan.DriverPodName)
	pod := runningDriverWithin(t, 60*time.Second, ns, names, "")
	for _, g := range pod.Spec.SchedulingGates {
		t.Errorf("S-0 carries gate %s", g.Name)
	}
	if p := getPod(t, ns, s.plan.DriverPodName); !convert.HasGate(&p.Spec, gate) {
		t.Errorf("the placeholder lost gate %s: %v", gate, p.Spec.SchedulingGates)
	}
}
