package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// indexController indexes the cache's StatefulSets by the UID of the pod that controls them (a
// placeholder), so that S is found by whose it is, whatever its name (convert.StatefulSetOf).
const indexController = convert.IndexController

// controllerUID is indexController's key.
func controllerUID(o client.Object) []string { return convert.ControllerUID(o) }

// namesOf returns the names of p's objects, and the name of the StatefulSet p controls with where
// it was found. S is found by its controller reference, p's UID, never by a name this build
// computes: a StatefulSet p controls under any name (the legacy 32-bit suffix,
// contract.LegacyNamesFor; a name an earlier or later driverset gave, across a rollback or a naming
// change) keeps its name, and so one placeholder never gets a second StatefulSet, a second driver.
// Only the controller reference decides, never anything a tenant can write on p.
//
// First the cache, by the index indexController. When it has none, the apiserver, before anything
// is created: a new leader whose watch is behind the old leader's create, or the first pass after
// an upgrade, would otherwise make a second S. Only when neither has one are the names this
// build's (contract.NamesFor): found is then "" and Skipped.
func (r *Placeholder) namesOf(ctx context.Context, p *corev1.Pod) (contract.Names, Read[string], error) {
	at := r.now()
	var cached appsv1.StatefulSetList
	if err := r.Client.List(ctx, &cached, client.InNamespace(p.Namespace), client.MatchingFields{indexController: string(p.UID)}); err != nil {
		return contract.Names{}, Read[string]{}, err
	}
	metas := make([]metav1.Object, 0, len(cached.Items))
	for i := range cached.Items {
		metas = append(metas, &cached.Items[i])
	}
	if name := controlledBy(p, metas); name != "" {
		return namesWith(p, name), reading(name, FromCache, at), nil
	}
	at = r.now()
	name, err := r.statefulSetOfLive(ctx, p)
	if err != nil || name != "" {
		return namesWith(p, name), reading(name, FromAPIServer, at), err
	}
	return namesWith(p, ""), reading("", Skipped, at), nil
}

// namesOfLive is namesOf read from the apiserver alone, for the creates webhook (Built): what
// driverset's token may create is decided on the StatefulSet p controls now, not on what a
// replica's cache last saw (a StatefulSet deleted since would otherwise still name a Service).
func (r *Placeholder) namesOfLive(ctx context.Context, p *corev1.Pod) (contract.Names, error) {
	name, err := r.statefulSetOfLive(ctx, p)
	if err != nil {
		return contract.Names{}, err
	}
	return namesWith(p, name), nil
}

// namesWith is the one naming decision: the names that go with sts, the name of the StatefulSet p
// controls (contract.NamesOfStatefulSet: its headless Service, its pod, that pod's stable name),
// whichever build gave it; this build's names for p (contract.NamesFor) only while p controls
// none ("").
func namesWith(p *corev1.Pod, sts string) contract.Names {
	if sts == "" {
		return contract.NamesFor(p.Name)
	}
	return contract.NamesOfStatefulSet(sts)
}

// statefulSetOfLive is the name of the StatefulSet p controls as the apiserver has it; "" when
// none. It lists only metadata, of the StatefulSets labelled driverset's (every one driverset
// makes, whichever build), a page at a time: the apiserver has no field selector for an owner.
func (r *Placeholder) statefulSetOfLive(ctx context.Context, p *corev1.Pod) (string, error) {
	var metas []metav1.Object
	opts := []client.ListOption{client.InNamespace(p.Namespace), client.HasLabels{contract.LabelDriver}, client.Limit(livePage)}
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("StatefulSetList"))
		if err := r.apiReader().List(ctx, list, opts...); err != nil {
			return "", err
		}
		for i := range list.Items {
			if metav1.IsControlledBy(&list.Items[i], p) {
				metas = append(metas, &list.Items[i])
			}
		}
		if list.Continue == "" {
			return controlledBy(p, metas), nil
		}
		opts = []client.ListOption{client.InNamespace(p.Namespace), client.HasLabels{contract.LabelDriver}, client.Limit(livePage), client.Continue(list.Continue)}
	}
}

// controlledBy is namesOf's decision, pure (convert.StatefulSetOf): the name of the StatefulSet of
// sets that p controls; "" when none; the oldest of several.
func controlledBy(p *corev1.Pod, sets []metav1.Object) string {
	if s := convert.StatefulSetOf(p, sets); s != nil {
		return s.GetName()
	}
	return ""
}
