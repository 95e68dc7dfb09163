package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/contract"
)

// namesOf returns the names of p's objects: contract.NamesFor, unless p already controls a
// StatefulSet under the name an earlier driverset gave it (contract.LegacyNamesFor), which it then
// keeps. Only the StatefulSet's controller reference decides, never anything a tenant can write on
// p, so an upgrade (or an edit) can never give one placeholder a second StatefulSet.
//
// The cache answers on every pass but the first of an app, where neither StatefulSet is there yet:
// then, before the current name is created, the legacy one is read from the apiserver, since the
// cache may not have seen it yet (a new leader whose watch is behind the old leader's create, just
// after an upgrade) and a miss there would make a second driver.
func (r *Placeholder) namesOf(ctx context.Context, p *corev1.Pod) (contract.Names, error) {
	current, legacy := contract.NamesFor(p.Name), contract.LegacyNamesFor(p.Name)
	if legacy == current {
		return current, nil
	}
	sts, err := r.statefulSetNamed(ctx, r.Client, p.Namespace, legacy.StatefulSet)
	if err != nil || sts != nil {
		return chooseNames(p, sts, current, legacy), err
	}
	if cur, err := r.statefulSetNamed(ctx, r.Client, p.Namespace, current.StatefulSet); err != nil || cur != nil && metav1.IsControlledBy(cur, p) {
		return current, err
	}
	sts, err = r.statefulSetNamed(ctx, r.apiReader(), p.Namespace, legacy.StatefulSet)
	return chooseNames(p, sts, current, legacy), err
}

// statefulSetNamed reads the StatefulSet ns/name through reader; nil when there is none.
func (r *Placeholder) statefulSetNamed(ctx context.Context, reader client.Reader, ns, name string) (*appsv1.StatefulSet, error) {
	var sts appsv1.StatefulSet
	err := reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &sts)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &sts, nil
}

// chooseNames is namesOf's decision: legacy when legacySts (the StatefulSet of legacy's name) is
// controlled by p, current otherwise.
func chooseNames(p *corev1.Pod, legacySts *appsv1.StatefulSet, current, legacy contract.Names) contract.Names {
	if legacySts != nil && metav1.IsControlledBy(legacySts, p) {
		return legacy
	}
	return current
}
