//go:build testbed

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/webhook"
)

// authorizeArgs are the flags that make driverset ask who may use an extended resource.
var authorizeArgs = []string{"--authorize-extended-resources"} //nolint:gochecknoglobals // the flags under test

// Attack: S-0 gets its GPUs from the placeholder's annotation and is created by the StatefulSet
// controller, so a cluster that gives GPUs only to some users (here: through driverset's grant,
// verb "use" on extendedresources.driverset.dev) sees no request of the tenant's for them. With
// --authorize-extended-resources, a tenant with only `edit` who opts a GPU driver in is refused,
// naming the resource and the grant; given the grant for nvidia.com/gpu in its namespace, its
// driver is admitted and S-0 asks for the GPUs.
func TestExtendedResourcesNeedTheSubmittersGrant(t *testing.T) {
	ctx := context.Background()
	replaceSharedDriverset(t, "authorize-extended-resources", authorizeArgs...)

	ns := namespace(t, nil)
	c := tenant(t, ns)

	// No grant: refused at submission, nothing left behind.
	_, err := c.CoreV1().Pods(ns).Create(ctx, gpuDriver(t, ns, "no-grant"), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), `may not "use" it here`) || !strings.Contains(err.Error(), string(gpu)) {
		t.Errorf("a GPU driver without the grant was answered %v, want driverset's refusal naming %s and the grant", err, gpu)
	} else {
		t.Logf("refused: %v", err)
	}
	noGPUDriverAmong(t, c, ns, "no-grant", "", ofApp("no-grant"))

	// The grant, as an admin gives it: a Role for nvidia.com/gpu only, bound to the tenant.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "gpu-users", Namespace: ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{webhook.GrantGroup}, Resources: []string{webhook.GrantResource},
		Verbs: []string{webhook.GrantVerb}, ResourceNames: []string{string(gpu)},
	}}}
	if _, err := kube().RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-users", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "tenant-of-" + ns}},
	}
	if _, err := kube().RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var admitted error
	waitFor(t, 30*time.Second, "the grant in force and the GPU driver admitted", func(ctx context.Context) (bool, error) {
		_, admitted = c.CoreV1().Pods(ns).Create(ctx, gpuDriver(t, ns, "granted"), metav1.CreateOptions{})
		return admitted == nil, nil
	})
	names := contract.NamesFor("granted")
	waitFor(t, 60*time.Second, "S-0 of the granted driver", func(ctx context.Context) (bool, error) {
		_, err := kube().CoreV1().Pods(ns).Get(ctx, names.DriverPodName(), metav1.GetOptions{})
		return err == nil, nil
	})
	s0 := getPod(t, ns, names.DriverPodName())
	for _, ct := range s0.Spec.Containers {
		if ct.Name != contract.DriverContainerName {
			continue
		}
		if q := ct.Resources.Limits[gpu]; q.String() != "8" {
			t.Errorf("S-0's driver container has %s GPUs in its limits, want 8: %v", q.String(), ct.Resources)
		}
	}
}
