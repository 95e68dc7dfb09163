//go:build testbed

package install

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/sparksim"
)

// checkHelmTest: helm test reports its pod Succeeded, and that pod ran `driverset check` (as its
// ServiceAccount, by the stand-in) and it passed.
func checkHelmTest(_ context.Context, t *testing.T, b *docBed, _ docCommand, out string) {
	if !regexp.MustCompile(`(?m)^Phase:\s+Succeeded$`).MatchString(out) {
		t.Errorf("helm test printed no Phase: Succeeded:\n%s", out)
	}
	runs := b.runs.of("check")
	if len(runs) != 1 || runs[0].Code != 0 {
		t.Errorf("the test pod's driverset check runs: %+v, want one that passed", runs)
	}
}

// recordImage keeps the Deployment's image before an upgrade.
func recordImage(ctx context.Context, t *testing.T, b *docBed, _ docCommand) {
	b.image = deploymentImage(ctx, t, b)
}

// checkUpgradedImage: the upgrade kept the install's values (--reuse-values: the repository) and
// set the tag the command names.
func checkUpgradedImage(ctx context.Context, t *testing.T, b *docBed, c docCommand, _ string) {
	m := regexp.MustCompile(`image\.tag=(\S+)`).FindStringSubmatch(c.Text)
	if m == nil {
		t.Fatalf("%s sets no image.tag", c)
	}
	repo := b.image[:strings.LastIndex(b.image, ":")]
	if got, want := deploymentImage(ctx, t, b), repo+":"+m[1]; got != want {
		t.Errorf("after the upgrade driverset runs %s, want %s (was %s)", got, want, b.image)
	}
}

func deploymentImage(ctx context.Context, t *testing.T, b *docBed) string {
	t.Helper()
	d, err := b.c.Client.AppsV1().Deployments(systemNamespace).Get(ctx, "driverset", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

// uninstallApp is the app running while driverset is uninstalled with Helm: its placeholder, S-0
// and StatefulSet template carry the finalizer the hook must take off.
const uninstallApp = "helm-app-driver"

// startAppForUninstall: an opted-in app runs when the admin uninstalls, as the docs assume.
func startAppForUninstall(ctx context.Context, t *testing.T, b *docBed, _ docCommand) {
	plan, err := sparksim.App{Version: sparksim.Spark35, Name: "helm-app", Namespace: "default", DriverPodName: uninstallApp,
		DriverLabels: map[string]string{contract.LabelResilient: "true"}}.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sparksim.SubmitPlan(ctx, b.c.Client, plan, sparksim.SubmitOptions{}); err != nil || res.ExitCode != 0 {
		t.Fatalf("spark-submit: exit %v, %v", res, err)
	}
	s0 := contract.NamesFor(uninstallApp).StatefulSet + "-0"
	poll(ctx, t, 2*time.Minute, s0+" running with driverset's finalizer", func(ctx context.Context) (bool, error) {
		p, err := b.c.Client.CoreV1().Pods("default").Get(ctx, s0, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not made yet
		}
		return p.Status.Phase == corev1.PodRunning && slices.Contains(p.Finalizers, contract.FinalizerOutcome), nil
	})
}

// checkHelmUninstalled: driverset is gone with its Deployment; the hook ran `driverset
// uninstall-cleanup` twice (pre- and post-delete), the first taking the finalizer off the running
// app's StatefulSet template; no pod or template keeps it.
func checkHelmUninstalled(ctx context.Context, t *testing.T, b *docBed, c docCommand, out string) {
	stopLocalDriverset(ctx, t, b, c, out)
	runs := b.runs.of("uninstall-cleanup")
	if len(runs) != 2 {
		t.Errorf("the hook ran driverset uninstall-cleanup %d times, want 2 (pre-delete, post-delete)", len(runs))
	}
	for _, r := range runs {
		if r.Code != 0 {
			t.Errorf("pod %s: exit %d", r.Pod, r.Code)
		}
	}
	sts := "StatefulSet default/" + contract.NamesFor(uninstallApp).StatefulSet + ": finalizer " + contract.FinalizerOutcome + " removed"
	if len(runs) == 0 || !strings.Contains(runs[0].Out, sts) {
		t.Errorf("the pre-delete run does not report %q", sts)
	}
	checkNoFinalizers(ctx, t, b)
}

// checkNothingLeft: the docs' delete took every Secret and Lease driverset made in its namespace.
func checkNothingLeft(ctx context.Context, t *testing.T, b *docBed, _ docCommand, _ string) {
	secrets, err := b.c.Client.CoreV1().Secrets(systemNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		t.Errorf("Secret %s left", s.Name)
	}
	leases, err := b.c.Client.CoordinationV1().Leases(systemNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		t.Errorf("Lease %s left", l.Name)
	}
}
