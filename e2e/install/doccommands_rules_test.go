//go:build testbed

package install

import (
	"context"
	"regexp"
	"strings"
	"testing"
)

// docRule says how TestDocumentedCommandsRun treats the documented commands that begin with
// prefix (the first rule that matches wins). A command no rule matches is run as written if
// runnable, and is an error otherwise.
type docRule struct {
	prefix string
	// skip is why the command is not run; "" when it is.
	skip string
	// run replaces running the command as written (why says with what); nil: run as written.
	run func(ctx context.Context, t *testing.T, b *docBed, c docCommand)
	why string
	// before runs first: what the docs assume has happened (a node powered off, say).
	before func(ctx context.Context, t *testing.T, b *docBed, c docCommand)
	// check is given the command's stdout once it exited 0.
	check func(ctx context.Context, t *testing.T, b *docBed, c docCommand, out string)
}

// docCommandRules: what is not run and why, what is run otherwise, and what each command's
// output must show. One table, read by both tests.
func docCommandRules() []docRule {
	return []docRule{
		{prefix: "make release ", skip: "builds the release from the repository (two images, SBOMs, chart, plugin archives); " +
			"TestReleaseInstallsFromDist (make e2e-release) installs one from dist/ on a real node. Here dist/install.yaml is " +
			"rendered as the release renders it: hack/render-install.sh, the image pinned to a digest"},
		{prefix: "crane push ", skip: "no registry on the test bed; KWOK nodes pull no image"},
		// The upgrade's apply: the install's key-maker Job would be gone a minute after it ended
		// (ttlSecondsAfterFinished); KWOK runs no container, so it never ends here.
		{prefix: "kubectl apply --server-side -f my-install.yaml", before: deleteKeyMakerJob, check: checkInstalled},
		{prefix: "kubectl apply --server-side -f ", check: checkInstalled},
		{prefix: "kubectl apply -k manifests/overlays/cert-manager", skip: "needs cert-manager in the cluster; " +
			"TestInstallOnTheTestBed applies the overlay server-side against cert-manager's own CRDs"},
		{prefix: "kubectl apply --server-side -k manifests/overlays/namespaced", skip: "an admin copies the overlay and lists " +
			"their namespaces in it first; TestNamespacedInstall applies it on the test bed, driverset running under its RBAC alone"},
		{prefix: "helm install ", check: checkInstalled},
		{prefix: "helm test ", check: checkHelmTest},
		// The same for Helm's upgrade, which patches the Job when it still exists (and makes it
		// again once its TTL has removed it).
		{prefix: "helm upgrade ", before: func(ctx context.Context, t *testing.T, b *docBed, c docCommand) {
			deleteKeyMakerJob(ctx, t, b, c)
			recordImage(ctx, t, b, c)
		}, check: checkUpgradedImage},
		{prefix: "helm uninstall ", before: startAppForUninstall, check: checkHelmUninstalled},
		{prefix: "kubectl -n driverset-system delete secret/", check: checkNothingLeft},
		{prefix: "kubectl driverset check ", check: checkCheck},
		{prefix: "kubectl -n spark-jobs create rolebinding driverset-heartbeat ", check: checkHeartbeatRole},
		{prefix: "kubectl -n driverset-system logs job/driverset-make-seal-key", skip: "KWOK runs no container, so the Job has no " +
			"log; the Job runs on real nodes in e2e/realnode's TestFreshInstallMakesTheSealKey"},
		{prefix: "kubectl -n driverset-system delete secret driverset-seal ", skip: "the rotation of the seal key: KWOK nodes run " +
			"no Job, so the test bed has no Secret driverset-seal (driverset runs as a local process, the harness writing its key " +
			"file); the key-maker is run as its ServiceAccount by e2e's TestDriversetTokenCannotReadTheSealKey, a new key read " +
			"without a restart by seal's TestSealerReadsItsKeyFile, the Job on real nodes by TestFreshInstallMakesTheSealKey"},
		{prefix: "kubectl delete pod <driver>", skip: "stops an app; here, driverset being uninstalled, its placeholder would wait " +
			"for uninstall-cleanup (as the next paragraph says); e2e's TestDeletingThePlaceholderCollectsEverything runs it"},
		{prefix: "kubectl run driverset-check ", check: checkGated},
		{prefix: "kubectl label namespace spark-jobs driverset.dev/policy=enforce", check: checkEnforced},
		{prefix: "spark-submit ", run: submitDocApp, why: "the simulated spark-submit (e2e/sparksim, Spark 3.5, call by call) of an app " +
			"with the docs' label, named as the commands after it name it"},
		{prefix: "kubectl driverset status ", before: waitDriverRunning, check: checkStatus},
		{prefix: "kubectl taint node N ", before: powerOffDriverNode},
		{prefix: "kubectl driverset why ", check: checkWhy},
		{prefix: "kubectl driverset logs ", skip: "KWOK runs no container, so there is no log; logs, -f, --since, --timestamps and -c " +
			"are run on a real node by e2e/realnode's TestDriverLifecycleInARestrictedNamespace"},
		{prefix: "kubectl driverset list ", check: checkList},
		{prefix: "kubectl get pods -A -l driverset.dev/placeholder=true", check: checkList},
		{prefix: "DRIVERSET_IMAGE=", check: checkRendered},
		{prefix: "kubectl delete -f my-install.yaml", check: stopLocalDriverset},
		{prefix: "kubectl -n driverset-cleanup run cleanup ", check: runCleanupAsItsServiceAccount},
		{prefix: "kubectl -n driverset-cleanup logs -f pod/cleanup", skip: "KWOK runs no container, so there is no log; the test ran " +
			"the pod's command, driverset uninstall-cleanup, as the pod's ServiceAccount instead (the run command's rule) and checked its output"},
	}
}

// ruleFor is c's rule; ok is false when c is neither run nor listed.
func ruleFor(c docCommand) (docRule, bool) {
	for _, r := range docCommandRules() {
		if strings.HasPrefix(c.Text, r.prefix) || strings.TrimSpace(r.prefix) == c.Text {
			return r, true
		}
	}
	return docRule{}, runnable(c.Text)
}

// docPlaceholders are the docs' placeholders and what the test bed puts in their place: one
// table. The node N is the one its rule powered off.
func docPlaceholders(b *docBed) []docPlaceholder {
	return []docPlaceholder{
		{regexp.MustCompile(`<driver>`), quickstartDriver},
		{regexp.MustCompile(`<ns>`), usageNamespace},
		{regexp.MustCompile(`(^| )N( |$)`), "${1}" + b.poweredOff + "${2}"},
		// The repository's scripts and chart, run from the test's folder.
		{regexp.MustCompile(`(^|[ =])hack/`), "${1}" + b.root + "/hack/"},
		{regexp.MustCompile(`(^| )charts/`), "${1}" + b.root + "/charts/"},
	}
}

type docPlaceholder struct {
	doc  *regexp.Regexp
	test string
}

// The apps the docs' commands name: the quick start's <driver> in the default namespace, and
// usage.md's pi-driver in spark-jobs.
const (
	quickstartDriver = "quickstart-driver"
	usageDriver      = "pi-driver"
	usageNamespace   = "spark-jobs"
)
