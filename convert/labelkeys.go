package convert

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// unmergeLabelKeys undoes, in spec, what the apiserver did to the placeholder's
// matchLabelKeys/mismatchLabelKeys when it created it, so S-0 gets the constraints as the user
// wrote them.
//
// On pod create (k8s.io/kubernetes pkg/registry/core/pod/strategy.go, v1.37: mutateTopologySpreadConstraints
// and mutatePodAffinity), the apiserver appends to the labelSelector of every topology spread
// constraint and every pod (anti-)affinity term, for each of its matchLabelKeys the pod has a
// label for, `key In (value)`, then for each mismatchLabelKeys `key NotIn (value)`. A template
// copied from the persisted placeholder carries those expressions and the keys both; creating S-0
// merges them again, and validation refuses every create ("exists in both matchLabelKeys and
// labelSelector"). labels are the placeholder's, the ones the apiserver merged.
//
// Only an exact suffix of what the merge appends is removed: when the merge did not happen (the
// feature gate off, an older apiserver) or the labels changed since, the selector is left as it is.
func unmergeLabelKeys(spec *corev1.PodSpec, labels map[string]string) {
	for i := range spec.TopologySpreadConstraints {
		c := &spec.TopologySpreadConstraints[i]
		unmergeSelector(c.LabelSelector, c.MatchLabelKeys, nil, labels)
	}
	a := spec.Affinity
	if a == nil {
		return
	}
	var terms []*corev1.PodAffinityTerm
	if a.PodAffinity != nil {
		terms = appendTerms(terms, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if a.PodAntiAffinity != nil {
		terms = appendTerms(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	for _, t := range terms {
		unmergeSelector(t.LabelSelector, t.MatchLabelKeys, t.MismatchLabelKeys, labels)
	}
}

func appendTerms(terms []*corev1.PodAffinityTerm, required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm) []*corev1.PodAffinityTerm {
	for i := range required {
		terms = append(terms, &required[i])
	}
	for i := range preferred {
		terms = append(terms, &preferred[i].PodAffinityTerm)
	}
	return terms
}

// unmergeSelector removes from sel the expressions the apiserver appended for match and mismatch
// keys, when sel ends with exactly them. A nil selector is never merged (it matches nothing).
func unmergeSelector(sel *metav1.LabelSelector, match, mismatch []string, labels map[string]string) {
	if sel == nil || (len(match) == 0 && len(mismatch) == 0) {
		return
	}
	var merged []metav1.LabelSelectorRequirement
	for _, k := range match {
		if v, ok := labels[k]; ok {
			merged = append(merged, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
		}
	}
	for _, k := range mismatch {
		if v, ok := labels[k]; ok {
			merged = append(merged, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpNotIn, Values: []string{v}})
		}
	}
	n := len(sel.MatchExpressions) - len(merged)
	if len(merged) == 0 || n < 0 || !reflect.DeepEqual(sel.MatchExpressions[n:], merged) {
		return
	}
	sel.MatchExpressions = sel.MatchExpressions[:n]
	if n == 0 {
		sel.MatchExpressions = nil
	}
}
