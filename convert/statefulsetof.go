package convert

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A placeholder's StatefulSet S is the one it controls (its controller ownerReference, ownedBy),
// whatever its name: the names a build computes (contract.NamesFor) change across builds, and an
// app keeps the StatefulSet it was given (the legacy 32-bit suffix, contract.LegacyNamesFor; a
// name an earlier or later driverset gave, across a rollback). The controller, the executor
// webhook and kubectl driverset find S by it; a name is only a guess that they check against it.

// IndexController is the name of the caches' index of StatefulSets by the UID of the pod that
// controls them (a placeholder): ControllerUID is its key.
const IndexController = "driverset.dev/controller-uid"

// ControllerUID is IndexController's key of o: the UID of o's controller when that is a v1 Pod.
func ControllerUID(o metav1.Object) []string {
	ref := metav1.GetControllerOfNoCopy(o)
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Pod" {
		return nil
	}
	return []string{string(ref.UID)}
}

// StatefulSetOf is the one of sets that p controls: p's S; nil when none. Should there be more
// than one (made before S was found by its controller), the oldest, by creation and then by name,
// so that every reader (each pass, each replica, the webhook, the plugin) takes the same one.
func StatefulSetOf(p metav1.Object, sets []metav1.Object) metav1.Object {
	var ours []metav1.Object
	for _, s := range sets {
		if metav1.IsControlledBy(s, p) {
			ours = append(ours, s)
		}
	}
	if len(ours) == 0 {
		return nil
	}
	return slices.MinFunc(ours, func(a, b metav1.Object) int {
		if c := a.GetCreationTimestamp().Compare(b.GetCreationTimestamp().Time); c != 0 {
			return c
		}
		return strings.Compare(a.GetName(), b.GetName())
	})
}
