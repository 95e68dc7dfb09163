//go:build testbed

package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/seal"
	"github.com/driverset/driverset/webhook"
)

// Attack (issue 35): a seal covers a placeholder's namespace, name and recorded resources, and holds
// for 2 minutes (seal.MaxSkew). A tenant with `edit` who sees a granted user's GPU placeholder
// deletes it (removing its finalizer, which `edit` allows) and posts it again under the same name,
// seal copied: without the opt-in label driverset's webhook never sees that create, and the
// controller built a driver with the recorded GPUs for a tenant who holds no grant. Now the
// webhook records who the seal was made for (seal.CreatorAnnotation, under the seal) and the
// policy driverset-seal-creator refuses a sealed placeholder created by anyone else. Before (the
// old code): the re-post without the opt-in label was admitted and its StatefulSet built; with
// the opt-in label the webhook's own grant check refused it. The same seal added by an update to a
// placeholder posted unsealed is refused too (built, on the old code).
func TestTenantCannotRepostAGrantedPlaceholder(t *testing.T) {
	ctx := context.Background()
	replaceSharedDriverset(t, "authorize-extended-resources", authorizeArgs...)
	ns := namespace(t, nil)
	c := tenant(t, ns)
	const grantedUser = "granted"
	granted := editor(t, ns, grantedUser, "granted")
	grantGPUs(t, ns, grantedUser)

	for _, tc := range []struct {
		name, variant string
		optedIn       bool
		// byUpdate: posted without the seal, which an update then adds.
		byUpdate bool
	}{
		{name: "repost-out", variant: "not opted in"},
		{name: "repost-in", variant: "opted in", optedIn: true},
		{name: "repost-upd", variant: "sealed by an update", byUpdate: true},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			name := tc.name
			// The granted user's submission runs, with its GPUs: the sealing path still works.
			var err error
			waitFor(t, 30*time.Second, "the grant in force and the GPU driver admitted", func(ctx context.Context) (bool, error) {
				_, err = granted.CoreV1().Pods(ns).Create(ctx, gpuDriver(t, ns, name), metav1.CreateOptions{})
				return err == nil, nil
			})
			names := contract.NamesFor(name)
			waitFor(t, 60*time.Second, "the granted driver's StatefulSet", func(ctx context.Context) (bool, error) {
				_, err := kube().AppsV1().StatefulSets(ns).Get(ctx, names.StatefulSet, metav1.GetOptions{})
				return err == nil, nil
			})
			p := getPod(t, ns, name)
			if p.Annotations[seal.CreatorAnnotation] != grantedUser {
				t.Errorf("the placeholder's seal is for %q, want %q", p.Annotations[seal.CreatorAnnotation], grantedUser)
			}

			// The tenant takes it down, and waits for its StatefulSet to go with it.
			if _, err := c.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
				t.Fatalf("the tenant removing the placeholder's finalizers: %v", err)
			}
			if err := c.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("the tenant deleting the placeholder: %v", err)
			}
			// Its driver pod too: the GPUs looked for afterwards are the re-post's alone.
			waitFor(t, 60*time.Second, "the placeholder, its StatefulSet and its driver pod gone", func(ctx context.Context) (bool, error) {
				_, serr := kube().AppsV1().StatefulSets(ns).Get(ctx, names.StatefulSet, metav1.GetOptions{})
				pods, err := kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, err
				}
				for i := range pods.Items {
					if ofApp(name)(&pods.Items[i]) {
						return false, nil
					}
				}
				return apierrors.IsNotFound(serr), nil
			})

			repost := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: p.Labels, Annotations: p.Annotations}, Spec: p.Spec}
			if !tc.optedIn {
				repost.Labels = copyWithout(repost.Labels, contract.LabelResilient)
			}
			t.Logf("re-posted %s after the seal was made", time.Since(p.CreationTimestamp.Time).Round(time.Second))
			if tc.byUpdate {
				repost.Annotations = copyWithout(copyWithout(repost.Annotations, seal.Annotation), seal.CreatorAnnotation)
				if _, err := c.CoreV1().Pods(ns).Create(ctx, repost, metav1.CreateOptions{}); err != nil {
					t.Fatalf("the tenant's unsealed placeholder: %v", err)
				}
				patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
					seal.Annotation: p.Annotations[seal.Annotation], seal.CreatorAnnotation: p.Annotations[seal.CreatorAnnotation]}}})
				if _, err := c.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err == nil {
					t.Errorf("the tenant's update copying the granted placeholder's seal was admitted")
				} else {
					t.Logf("refused: %v", err)
				}
				noGPUDriverAmong(t, c, ns, name, "has no seal", ofApp(name))
				return
			}
			if _, err := c.CoreV1().Pods(ns).Create(ctx, repost, metav1.CreateOptions{}); err == nil {
				t.Errorf("the tenant's re-post of the granted placeholder was admitted")
			} else {
				t.Logf("refused: %v", err)
			}
			noGPUDriverAmong(t, c, ns, name, "", ofApp(name))
		})
	}
}

// grantGPUs gives user the right to ask for GPUs in ns, as an admin gives it under
// --authorize-extended-resources: a Role for nvidia.com/gpu only.
func grantGPUs(t *testing.T, ns, user string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "gpu-users-" + user, Namespace: ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{webhook.GrantGroup}, Resources: []string{webhook.GrantResource},
		Verbs: []string{webhook.GrantVerb}, ResourceNames: []string{string(gpu)},
	}}}
	if _, err := kube().RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := kube().RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
