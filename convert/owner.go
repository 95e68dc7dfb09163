package convert

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// persistedPlaceholder returns the names for p (n, or contract.NamesFor when n is empty) after
// checking that p is a placeholder as the apiserver persisted it. Building S for a pod that could
// itself run would break the guarantee that a driver never runs twice, so a pod without the
// placeholder gate is refused.
func persistedPlaceholder(p *corev1.Pod, n contract.Names) (contract.Names, error) {
	if p == nil {
		return contract.Names{}, errors.New("no placeholder pod")
	}
	if p.Name == "" || p.Namespace == "" || p.UID == "" {
		return contract.Names{}, fmt.Errorf("pod %s is not persisted yet (it needs a name, a namespace and a UID)", podRef(p))
	}
	if !HasGate(&p.Spec, contract.GatePlaceholder) {
		return contract.Names{}, fmt.Errorf("pod %s has no scheduling gate %s, so it could run itself; driverset runs "+
			"a driver only for a gated placeholder", podRef(p), contract.GatePlaceholder)
	}
	// Only the shape: the annotations S does not use (max-restarts, fence-after) may be edited on a
	// running placeholder, and must not stop driverset from (re)building its objects.
	if err := checkShape(p); err != nil {
		return contract.Names{}, err
	}
	if n.StatefulSet == "" {
		n = contract.NamesFor(p.Name)
	}
	return n, nil
}

// ownedBy is the one ownerReference of everything built for p: deleting p (the usual way to stop a
// Spark app) garbage-collects it, and it is never adopted by anything else.
func ownedBy(p *corev1.Pod) []metav1.OwnerReference {
	yes := true
	return []metav1.OwnerReference{{
		APIVersion:         "v1",
		Kind:               "Pod",
		Name:               p.Name,
		UID:                p.UID,
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}}
}

// driverSelector selects the StatefulSet's driver pod and nothing else: the driver label alone would
// also match that pod's executors, which carry it too.
func driverSelector(n contract.Names) map[string]string {
	return map[string]string{contract.LabelDriver: n.StatefulSet, contract.LabelSparkRole: contract.RoleDriver}
}
