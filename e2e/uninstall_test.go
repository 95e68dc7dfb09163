//go:build testbed

package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/driverset/driverset/contract"
)

// Issue 35: with driverset gone, the finalizer driverset.dev/outcome strands pods. A deleted S-0
// and a deleted placeholder stay Terminating (a drain, the autoscaler and namespace deletion wait on
// them), until `driverset uninstall-cleanup`, run as the chart's pre-delete hook's ServiceAccount
// (the same rules as its ClusterRole), lets them go; the StatefulSet's next S-0 then has no
// finalizer. Before the command existed, both pods stayed Terminating.
func TestUninstallCleanupReleasesStrandedPods(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	dumpOnFailure(t, ns)
	kept := startApp(t, app(ns, "kept"), 0)       // its S-0 is deleted: the StatefulSet makes another
	stopped := startApp(t, app(ns, "stopped"), 0) // its placeholder is deleted: the app is stopped

	// Uninstalled: driverset stopped and its webhook configuration deleted (its first step).
	if err := bed.driverset.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { restoreSharedDriverset(t, true, nil) })
	if err := kube().AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, "driverset", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{kept.pod.Name, stopped.sub.plan.DriverPodName} {
		if err := kube().CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Second)
	for _, name := range []string{kept.pod.Name, stopped.sub.plan.DriverPodName} {
		if p := getPod(t, ns, name); p.DeletionTimestamp == nil || !slices.Contains(p.Finalizers, contract.FinalizerOutcome) {
			t.Fatalf("pod %s after its delete: deletionTimestamp %v, finalizers %v; want Terminating on driverset's finalizer",
				name, p.DeletionTimestamp, p.Finalizers)
		}
	}

	out, err := exec.Command(bed.binary, "uninstall-cleanup", "--kubeconfig", hookKubeconfig(t)).CombinedOutput()
	t.Logf("driverset uninstall-cleanup:\n%s", out)
	if err != nil {
		t.Fatalf("driverset uninstall-cleanup: %v", err)
	}
	for _, want := range []string{"Pod " + ns + "/" + kept.pod.Name, "Pod " + ns + "/" + stopped.sub.plan.DriverPodName,
		"StatefulSet " + ns + "/" + kept.names.StatefulSet} {
		if !strings.Contains(string(out), want+": finalizer "+contract.FinalizerOutcome+" removed") {
			t.Errorf("the report does not name %s", want)
		}
	}

	for _, name := range []string{kept.pod.Name, stopped.sub.plan.DriverPodName} {
		old := map[string]string{kept.pod.Name: string(kept.pod.UID), stopped.sub.plan.DriverPodName: ""}[name]
		waitFor(t, 60*time.Second, "deleted pod "+name+" gone", func(ctx context.Context) (bool, error) {
			p, err := kube().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			// The StatefulSet's next S-0 has the same name and another UID.
			return err == nil && old != "" && string(p.UID) != old, err
		})
	}
	next := runningDriver(t, ns, kept.names, string(kept.pod.UID))
	if slices.Contains(next.Finalizers, contract.FinalizerOutcome) {
		t.Errorf("the next S-0 %s still carries %s: %v", next.Name, contract.FinalizerOutcome, next.Finalizers)
	}
	if fin := getStatefulSet(t, ns, kept.names.StatefulSet).Spec.Template.Finalizers; slices.Contains(fin, contract.FinalizerOutcome) {
		t.Errorf("StatefulSet %s's template still has %v", kept.names.StatefulSet, fin)
	}
	// Idempotent: a second run finds nothing left to release.
	again, err := exec.Command(bed.binary, "uninstall-cleanup", "--kubeconfig", hookKubeconfig(t)).CombinedOutput()
	if err != nil || strings.Contains(string(again), "removed") {
		t.Errorf("a second run: %v\n%s", err, again)
	}
	// The app keeps running without driverset; stop it now, before driverset returns.
	if err := kube().CoreV1().Pods(ns).Delete(ctx, kept.sub.plan.DriverPodName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// hookKubeconfig is the test bed's admin kubeconfig acting as the chart's pre-delete hook's
// ServiceAccount, made here with the rules of its ClusterRole (charts/driverset/templates/uninstall,
// checked by e2e/install's TestChartUninstallHook): a missing right fails the command.
func hookKubeconfig(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	const name, sysNS = "driverset-uninstall-cleanup", "driverset-system"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "patch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, Verbs: []string{"get", "list", "patch"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: sysNS}}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: sysNS}}
	for _, err := range []error{
		ignoreExists(kube().RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})),
		ignoreExists(kube().RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})),
		ignoreExists(kube().CoreV1().ServiceAccounts(sysNS).Create(ctx, sa, metav1.CreateOptions{})),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := clientcmd.LoadFromFile(bed.cluster.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range cfg.AuthInfos {
		u.Impersonate = "system:serviceaccount:" + sysNS + ":" + name
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func ignoreExists[T any](_ T, err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// A drain while driverset is down and will come back: `--terminating-only` lets go only the driver
// pod being deleted; the other app's running S-0, both placeholders and both templates keep the
// finalizer, so that once driverset is back the drained app's next S-0 carries it again and no
// exit of a running driver can be lost.
func TestUninstallCleanupTerminatingOnlyForADrain(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	dumpOnFailure(t, ns)
	drained := startApp(t, app(ns, "drained"), 0)
	running := startApp(t, app(ns, "running"), 0)

	if err := bed.driverset.Stop(); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			restoreSharedDriverset(t, true, nil)
		}
	}
	t.Cleanup(restore)
	if err := kube().CoreV1().Pods(ns).Delete(ctx, drained.pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if p := getPod(t, ns, drained.pod.Name); p.DeletionTimestamp == nil {
		t.Fatalf("pod %s is not Terminating after its delete (finalizers %v)", p.Name, p.Finalizers)
	}

	out, err := exec.Command(bed.binary, "uninstall-cleanup", "--terminating-only", "--kubeconfig", hookKubeconfig(t)).CombinedOutput()
	t.Logf("driverset uninstall-cleanup --terminating-only:\n%s", out)
	if err != nil {
		t.Fatalf("driverset uninstall-cleanup --terminating-only: %v", err)
	}
	waitFor(t, 60*time.Second, "drained pod "+drained.pod.Name+" gone", func(ctx context.Context) (bool, error) {
		p, err := kube().CoreV1().Pods(ns).Get(ctx, drained.pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && p.UID != drained.pod.UID, err
	})
	for _, name := range []string{running.pod.Name, drained.sub.plan.DriverPodName, running.sub.plan.DriverPodName} {
		if p := getPod(t, ns, name); !slices.Contains(p.Finalizers, contract.FinalizerOutcome) {
			t.Errorf("pod %s, not being deleted, lost driverset's finalizer: %v", name, p.Finalizers)
		}
	}
	for _, sts := range []string{drained.names.StatefulSet, running.names.StatefulSet} {
		if fin := getStatefulSet(t, ns, sts).Spec.Template.Finalizers; !slices.Contains(fin, contract.FinalizerOutcome) {
			t.Errorf("StatefulSet %s's template lost driverset's finalizer: %v", sts, fin)
		}
	}

	restore()
	next := runningDriver(t, ns, drained.names, string(drained.pod.UID))
	if !slices.Contains(next.Finalizers, contract.FinalizerOutcome) {
		t.Errorf("the drained app's next S-0 %s lacks driverset's finalizer: %v", next.Name, next.Finalizers)
	}
}
