package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
)

// namesOf returns the names of p's objects: contract.NamesFor, unless p already controls a
// StatefulSet under the name an earlier driverset gave it (contract.LegacyNamesFor), which it then
// keeps. Only the StatefulSet's controller reference decides, never anything a tenant can write on
// p, so an upgrade (or an edit) can never give one placeholder a second StatefulSet.
func (r *Placeholder) namesOf(ctx context.Context, p *corev1.Pod) (contract.Names, error) {
	current, legacy := contract.NamesFor(p.Name), contract.LegacyNamesFor(p.Name)
	if legacy == current {
		return current, nil
	}
	// From the cache: a StatefulSet of an earlier driverset existed before this one started.
	var sts appsv1.StatefulSet
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: legacy.StatefulSet}, &sts)
	if apierrors.IsNotFound(err) {
		return current, nil
	}
	if err != nil {
		return contract.Names{}, err
	}
	return chooseNames(p, &sts, current, legacy), nil
}

// chooseNames is namesOf's decision: legacy when legacySts (the StatefulSet of legacy's name) is
// controlled by p, current otherwise.
func chooseNames(p *corev1.Pod, legacySts *appsv1.StatefulSet, current, legacy contract.Names) contract.Names {
	if legacySts != nil && metav1.IsControlledBy(legacySts, p) {
		return legacy
	}
	return current
}
