package convert

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// statefulSetGVK is apps/v1 StatefulSet, the kind of the executor-set cache's objects.
var statefulSetGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"} //nolint:gochecknoglobals // a constant

// ExecutorSetObject is an object of the executor-set cache: a StatefulSet's metadata.
func ExecutorSetObject() *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(statefulSetGVK)
	return o
}

// executorSetList is a list of the executor-set cache's objects.
func executorSetList() *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(statefulSetGVK.GroupVersion().WithKind("StatefulSetList"))
	return l
}

// ExecutorSetsOfIncarnation lists, from sets (the executor-set cache), the executor StatefulSets
// of the app whose driver pods are named driverPod (convert.ExecutorSetOfApp) that an incarnation
// other than the one with UID current made (all of them while current is empty: the pod being
// admitted has no UID yet). Nil sets reads none.
func ExecutorSetsOfIncarnation(ctx context.Context, sets client.Reader, ns, driverPod string, current types.UID) ([]metav1.PartialObjectMetadata, error) {
	if sets == nil {
		return nil, nil
	}
	list := executorSetList()
	if err := sets.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []metav1.PartialObjectMetadata
	for i := range list.Items {
		s := &list.Items[i]
		if ExecutorSetOfApp(s, driverPod) && (current == "" || metav1.GetControllerOfNoCopy(s).UID != current) {
			out = append(out, *s)
		}
	}
	return out, nil
}
