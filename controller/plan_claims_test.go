package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// TestPlanClaims: the claims spark-submit made for the driver are taken out of Spark's clean stop,
// a user's claim is left as it is, and a claim not made yet holds the StatefulSet back.
func TestPlanClaims(t *testing.T) {
	p := planPlaceholder(nil)
	yes := true
	claim := func(name string, owner *corev1.Pod, labels map[string]string) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "jobs", ResourceVersion: "7", Labels: labels}}
		if owner != nil {
			c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: owner.Name, UID: owner.UID, Controller: &yes}}
		}
		return c
	}
	app := map[string]string{contract.LabelSparkAppSelector: "spark-pi"}
	sparks := claim("pi-driver-pvc-0", p, app)
	users := claim("team-data", nil, app)
	kept := claim("pi-driver-pvc-1", p, map[string]string{contract.LabelClaimAppSelector: "spark-pi"})

	cases := []struct {
		name    string
		claims  []driverClaim
		keeps   []string // the claims patched, in order
		waiting string
	}{
		{name: "no claims: nothing to do", claims: nil},
		{name: "spark-submit's claim: kept", claims: []driverClaim{{Name: sparks.Name, PVC: sparks}}, keeps: []string{sparks.Name}},
		{name: "a user's claim: left as it is", claims: []driverClaim{{Name: users.Name, PVC: users}}},
		{name: "a claim kept already: not written again", claims: []driverClaim{{Name: kept.Name, PVC: kept}}},
		{name: "a claim not made yet: the StatefulSet waits for it, the claims before it kept meanwhile",
			claims: []driverClaim{{Name: sparks.Name, PVC: sparks}, {Name: "pi-driver-pvc-2"}}, keeps: []string{sparks.Name},
			waiting: "waiting for PersistentVolumeClaim pi-driver-pvc-2, which the driver mounts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			steps, waiting := planClaims(p, c.claims)
			if waiting != c.waiting {
				t.Errorf("waiting %q, want %q", waiting, c.waiting)
			}
			var keeps []string
			for _, st := range steps {
				k := st.(keepClaimStep)
				keeps = append(keeps, k.After.Name)
				if k.Before.ResourceVersion != "7" || k.After.Labels[contract.LabelClaimAppSelector] != "spark-pi" || k.After.Labels[contract.LabelSparkAppSelector] != "" {
					t.Errorf("keep %s: %v → %v, want the app id moved to %s under the version read", k.After.Name, k.Before.Labels, k.After.Labels, contract.LabelClaimAppSelector)
				}
				if k.Before.Labels[contract.LabelSparkAppSelector] == "" {
					t.Errorf("keep %s changed the claim as read: plan writes nothing", k.After.Name)
				}
			}
			if len(keeps) != len(c.keeps) || len(keeps) > 0 && keeps[0] != c.keeps[0] {
				t.Errorf("keeps %v, want %v", keeps, c.keeps)
			}
		})
	}
}
