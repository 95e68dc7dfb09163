package convert

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// apiserverMergesLabelKeys does to pod what the v1.37 apiserver does on create, after mutating
// admission (pkg/registry/core/pod/strategy.go: mutateTopologySpreadConstraints, mutatePodAffinity):
// each matchLabelKeys key the pod has a label for is appended to the selector as `key In (value)`,
// each mismatchLabelKeys key as `key NotIn (value)`.
func apiserverMergesLabelKeys(pod *corev1.Pod) {
	merge := func(sel *metav1.LabelSelector, keys []string, op metav1.LabelSelectorOperator) {
		for _, k := range keys {
			if v, ok := pod.Labels[k]; ok {
				sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: op, Values: []string{v}})
			}
		}
	}
	for i := range pod.Spec.TopologySpreadConstraints {
		c := &pod.Spec.TopologySpreadConstraints[i]
		if c.LabelSelector != nil {
			merge(c.LabelSelector, c.MatchLabelKeys, metav1.LabelSelectorOpIn)
		}
	}
	for _, t := range affinityTerms(&pod.Spec) {
		if t.LabelSelector != nil {
			merge(t.LabelSelector, t.MatchLabelKeys, metav1.LabelSelectorOpIn)
			merge(t.LabelSelector, t.MismatchLabelKeys, metav1.LabelSelectorOpNotIn)
		}
	}
}

func affinityTerms(spec *corev1.PodSpec) []*corev1.PodAffinityTerm {
	if spec.Affinity == nil {
		return nil
	}
	var terms []*corev1.PodAffinityTerm
	if a := spec.Affinity.PodAffinity; a != nil {
		terms = appendTerms(terms, a.RequiredDuringSchedulingIgnoredDuringExecution, a.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if a := spec.Affinity.PodAntiAffinity; a != nil {
		terms = appendTerms(terms, a.RequiredDuringSchedulingIgnoredDuringExecution, a.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	return terms
}

// labelKeyErrors is the apiserver's check of a merged pod (pkg/apis/core/validation,
// ValidateMatchLabelKeysAndMismatchLabelKeys): a matchLabelKeys key that is also in the selector
// once the merge has added it is refused.
func labelKeyErrors(spec *corev1.PodSpec) []string {
	var errs []string
	check := func(what string, sel *metav1.LabelSelector, match []string) {
		if sel == nil {
			return
		}
		isMatchKey := map[string]bool{}
		for _, k := range match {
			isMatchKey[k] = true
		}
		seen := map[string]bool{}
		for k := range sel.MatchLabels {
			seen[k] = true
		}
		for _, e := range sel.MatchExpressions {
			if isMatchKey[e.Key] && seen[e.Key] {
				errs = append(errs, fmt.Sprintf("%s: %q exists in both matchLabelKeys and labelSelector", what, e.Key))
			}
			seen[e.Key] = true
		}
	}
	for i, c := range spec.TopologySpreadConstraints {
		check(fmt.Sprintf("topologySpreadConstraints[%d]", i), c.LabelSelector, c.MatchLabelKeys)
	}
	for i, t := range affinityTerms(spec) {
		check(fmt.Sprintf("affinity term %d", i), t.LabelSelector, t.MatchLabelKeys)
	}
	return errs
}

// s0Create is what the apiserver does with the pod the StatefulSet controller creates from tpl:
// the template's labels plus the controller's own, merged, then checked.
func s0Create(tpl corev1.PodTemplateSpec, name string) (*corev1.Pod, []string) {
	pod := &corev1.Pod{ObjectMeta: *tpl.ObjectMeta.DeepCopy(), Spec: *tpl.Spec.DeepCopy()}
	pod.Name = name
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels["statefulset.kubernetes.io/pod-name"] = name
	pod.Labels["apps.kubernetes.io/pod-index"] = "0"
	pod.Labels["controller-revision-hash"] = name[:len(name)-2] + "-7d9f8c6b5"
	apiserverMergesLabelKeys(pod)
	return pod, labelKeyErrors(&pod.Spec)
}

func selector(expr ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{contract.LabelSparkRole: contract.RoleDriver}, MatchExpressions: expr}
}

// TestLabelKeysAreNotMergedTwice: a driver whose pod template uses matchLabelKeys or
// mismatchLabelKeys (Spark 3.5 pod templates spreading drivers by spark-app-selector) gets a
// StatefulSet whose S-0 the apiserver accepts, with the constraints as the user wrote them.
func TestLabelKeysAreNotMergedTwice(t *testing.T) {
	appKey := contract.LabelSparkAppSelector
	cases := []struct {
		name string
		edit func(*corev1.PodSpec)
	}{
		{"topology spread, matchLabelKeys", func(s *corev1.PodSpec) {
			s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
				LabelSelector: selector(), MatchLabelKeys: []string{appKey},
			}}
		}},
		{"topology spread, a key the pod has no label for, and one without a selector", func(s *corev1.PodSpec) {
			s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{
				{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
					LabelSelector: selector(), MatchLabelKeys: []string{"team", appKey}},
				{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
					MatchLabelKeys: []string{appKey}},
			}
		}},
		{"pod affinity required and anti-affinity preferred, match and mismatch keys", func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{
				PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey: "topology.kubernetes.io/zone", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"spark-role": "executor"}},
					MatchLabelKeys: []string{appKey},
				}}},
				PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
					Weight: 50, PodAffinityTerm: corev1.PodAffinityTerm{
						TopologyKey: "kubernetes.io/hostname",
						// A selector on the mismatch key itself is allowed, and must survive.
						LabelSelector:     selector(metav1.LabelSelectorRequirement{Key: appKey, Operator: metav1.LabelSelectorOpExists}),
						MismatchLabelKeys: []string{appKey},
					},
				}}},
			}
		}},
		{"pod anti-affinity required, both kinds of keys", func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: "kubernetes.io/hostname", LabelSelector: selector(),
				MatchLabelKeys: []string{contract.LabelSparkRole + "-x", appKey}, MismatchLabelKeys: []string{"spark-version"},
			}}}}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := driverPod()
			pod.Labels["spark-version"] = "3.5.3"
			c.edit(&pod.Spec)
			written := pod.Spec.DeepCopy()
			p := persisted(pod)
			if reflect.DeepEqual(p.Spec.TopologySpreadConstraints, written.TopologySpreadConstraints) &&
				reflect.DeepEqual(p.Spec.Affinity, written.Affinity) {
				t.Fatal("the simulated apiserver merged nothing: the case tests nothing")
			}
			s := buildS(t, p)
			if _, errs := s0Create(s.Spec.Template, s.Name+"-0"); len(errs) != 0 {
				t.Errorf("the apiserver refuses S-0: %v", errs)
			}
			if got := s.Spec.Template.Spec.TopologySpreadConstraints; !reflect.DeepEqual(got, written.TopologySpreadConstraints) {
				t.Errorf("template topologySpreadConstraints\n%+v\nwant as written\n%+v", got, written.TopologySpreadConstraints)
			}
			if got := s.Spec.Template.Spec.Affinity; !reflect.DeepEqual(got, written.Affinity) {
				t.Errorf("template affinity\n%+v\nwant as written\n%+v", got, written.Affinity)
			}
		})
	}
}

// TestLabelKeysLeftAloneWithoutTheMerge: a placeholder the apiserver did not merge (the feature
// gate off) keeps its selectors, the user's own expressions included.
func TestLabelKeysLeftAloneWithoutTheMerge(t *testing.T) {
	pod := driverPod()
	own := metav1.LabelSelectorRequirement{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"batch"}}
	pod.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: selector(own), MatchLabelKeys: []string{contract.LabelSparkAppSelector},
	}}
	written := pod.Spec.DeepCopy()
	if err := ToPlaceholder(pod); err != nil {
		t.Fatal(err)
	}
	pod.UID = "u"
	s := buildS(t, pod)
	if got := s.Spec.Template.Spec.TopologySpreadConstraints; !reflect.DeepEqual(got, written.TopologySpreadConstraints) {
		t.Errorf("template topologySpreadConstraints %+v, want as written %+v", got, written.TopologySpreadConstraints)
	}
}
