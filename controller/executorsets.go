package controller

import (
	"context"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// Spark's StatefulSet executor allocator makes one StatefulSet of executors per app id and
// resource profile (convert.ExecutorSetOfApp), with no label of its own: no label selector finds
// it, so the caches that select driverset's labels do not hold it. The incarnation gate must see
// one with no pod left (dynamic allocation scaled it to 0): a DStream's next driver makes a set
// of the same name, and its create fails while the old one is there. So driverset keeps a cache of
// every StatefulSet's metadata in the namespaces it watches, each cut to a fixed shape
// (executorSetTransform): what it costs grows with the number of StatefulSets, never with what a
// tenant writes into one.

// The executor claims of a lost incarnation's driver are waited for too: a DStream's next driver
// reuses any claim with its restored app id, a Terminating one too. The driver labels the claims
// it makes contract.LabelDriver (wrap gives it the volume settings), and only those are held, each
// cut to the same fixed shape and that one label: what they cost grows with the claims of the
// drivers driverset runs (and any claim a tenant labels so), not with every Spark app's.

// ExecutorSetCacheOptions are the executor-set cache's: the metadata of every StatefulSet, kept as
// executorSetTransform cuts it, and of every claim labelled contract.LabelDriver, kept as
// executorClaimTransform cuts it.
func ExecutorSetCacheOptions() cache.Options {
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		convert.ExecutorSetObject(): {Transform: executorSetTransform},
		convert.ExecutorClaimObject(): {
			Label:     labels.NewSelector().Add(requirement(contract.LabelDriver, selection.Exists)),
			Transform: executorClaimTransform,
		},
	}}
}

// executorClaimTransform keeps of a claim's metadata what executorSetTransform keeps of a
// StatefulSet's, and its contract.LabelDriver label (a label value: at most 63 characters), by
// which convert.ExecutorClaimsOfIncarnation selects it.
func executorClaimTransform(obj any) (any, error) {
	kept, err := executorSetTransform(obj)
	o, ok := kept.(*metav1.PartialObjectMetadata)
	if !ok || err != nil {
		return kept, err
	}
	if v, labelled := obj.(*metav1.PartialObjectMetadata).Labels[contract.LabelDriver]; labelled {
		o.Labels = map[string]string{contract.LabelDriver: v}
	}
	return o, nil
}

// maxRefName is the longest owner name kept: an object name's limit. A longer one names no pod.
const maxRefName = 253

// executorSetTransform keeps of a StatefulSet's metadata what convert.ExecutorSetOfApp and the
// gate read, and nothing else: its identity (namespace, name, UID, resourceVersion), its deletion
// timestamp, and its controller reference when that is a v1 Pod's (Spark's, to its driver pod).
// No label, annotation, finalizer or other owner: every StatefulSet of the watched namespaces is
// held, a tenant's too, and each keeps at most its names and one reference.
func executorSetTransform(obj any) (any, error) {
	o, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	kept := metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion,
		DeletionTimestamp: o.DeletionTimestamp}
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil && ref.APIVersion == "v1" && ref.Kind == "Pod" && len(ref.Name) <= maxRefName {
		kept.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: ref.Name, UID: ref.UID, Controller: ref.Controller}}
	}
	return &metav1.PartialObjectMetadata{TypeMeta: o.TypeMeta, ObjectMeta: kept}, nil
}

// placeholderOfExecutorSet maps one of Spark's executor StatefulSets to the placeholder of the
// driver pod that controls it (placeholderOfDriverOwned): its deletion may be the last thing a
// new incarnation's gate waits for.
func (r *Placeholder) placeholderOfExecutorSet(ctx context.Context, o client.Object) []reconcile.Request {
	if !convert.IsExecutorSetName(o.GetName()) {
		return nil
	}
	return r.placeholderOfDriverOwned(ctx, o)
}

// placeholderOfDriverOwned maps an object a driver pod controls (one of Spark's executor
// StatefulSets, an executor claim) to that pod's placeholder: S-0 → S → P.
func (r *Placeholder) placeholderOfDriverOwned(ctx context.Context, o client.Object) []reconcile.Request {
	ref := controllerOfKind(o, "Pod")
	if ref == nil {
		return nil
	}
	sts, ok := strings.CutSuffix(ref.Name, "-0")
	if !ok || contract.NamesOfStatefulSet(sts).DriverPodName() != ref.Name {
		return nil
	}
	return r.placeholderOfStatefulSet(ctx, o.GetNamespace(), sts)
}

// executorSetGone passes only deletions: a set's going is all the gate waits for.
func executorSetGone(e event.TypedDeleteEvent[*metav1.PartialObjectMetadata]) bool {
	return convert.IsExecutorSetName(e.Object.GetName())
}
