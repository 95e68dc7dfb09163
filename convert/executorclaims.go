package convert

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/contract"
)

// claimGVK is v1 PersistentVolumeClaim, the kind of the executor claims the executor-set cache
// holds too.
var claimGVK = schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"} //nolint:gochecknoglobals // a constant

// ExecutorClaimObject is a claim of the executor-set cache: a PersistentVolumeClaim's metadata.
func ExecutorClaimObject() *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(claimGVK)
	return o
}

// executorClaimList is a list of the executor-set cache's claims.
func executorClaimList() *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(claimGVK.GroupVersion().WithKind("PersistentVolumeClaimList"))
	return l
}

// ExecutorClaimOf reports whether claim is an executor claim that a driver pod named driverPod
// made: labelled contract.LabelDriver (the driver labels the claims it makes so, through the
// volume settings wrap gives it) and controlled by a v1 Pod of that name (Spark makes its driver
// pod the owner while spark.kubernetes.driver.ownPersistentVolumeClaim holds, the default since
// 3.4 and the only way it reuses claims). The driver's own claims are controlled by the
// placeholder, whose name is never S-0's, and carry no such label. Not by app id: an incarnation
// runs with an id of its own, and a DStream's restored one is shared.
func ExecutorClaimOf(claim metav1.Object, driverPod string) bool {
	ref := metav1.GetControllerOfNoCopy(claim)
	return claim.GetLabels()[contract.LabelDriver] != "" && ref != nil && ref.APIVersion == "v1" && ref.Kind == "Pod" && ref.Name == driverPod
}

// ExecutorClaimsOfIncarnation lists, from claims (the executor-set cache), the executor claims
// (ExecutorClaimOf) that a driver pod named driverPod other than the one with UID current made
// (all of them while current is empty: the pod being admitted has no UID yet). The garbage
// collector deletes each once its owner, that earlier pod, is gone, and the claim goes once no
// pod mounts it: the gate that waits for them is always lifted. Nil claims reads none.
func ExecutorClaimsOfIncarnation(ctx context.Context, claims client.Reader, ns, driverPod string, current types.UID) ([]metav1.PartialObjectMetadata, error) {
	if claims == nil {
		return nil, nil
	}
	list := executorClaimList()
	if err := claims.List(ctx, list, client.InNamespace(ns), client.HasLabels{contract.LabelDriver}); err != nil {
		return nil, err
	}
	var out []metav1.PartialObjectMetadata
	for i := range list.Items {
		c := &list.Items[i]
		if ExecutorClaimOf(c, driverPod) && (current == "" || metav1.GetControllerOfNoCopy(c).UID != current) {
			out = append(out, *c)
		}
	}
	return out, nil
}
