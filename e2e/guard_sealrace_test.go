//go:build testbed

package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/harness"
)

// Attack (issue 35): driverset checks a placeholder's seal on the copy in its cache, and builds the
// StatefulSet from the placeholder read live from the apiserver. A tenant with `edit` who changes
// the recorded resources (8 GPUs) after the webhook sealed the placeholder, but before driverset's
// cache has seen the change, had the seal pass on the cached copy and the GPUs built from the live
// one. An informer's cache lags its apiserver by milliseconds on a quiet cluster; here driverset
// reaches the apiserver through a proxy that hands on every watch 8 s late (a cache under load),
// which turns the race into a schedule: the tenant's edit lands 3 s after its create, and driverset
// first looks at the placeholder 8 s after the create, its cache still holding the sealed copy.
// The seal is now verified on the live read the StatefulSet is built from: nothing is built; and
// the creates entry, which checks what driverset's token creates against the placeholder read live,
// would refuse it too.
func TestTenantEditRacingTheSealCheckBuildsNothing(t *testing.T) {
	const lag, editAfter = 8 * time.Second, 3 * time.Second
	proxy, err := harness.StartLaggingAPIServer(bed.cluster.Config, lag, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	replica := replaceSharedDriversetOn(t, "seal-race", proxy.Kubeconfig)
	ns := namespace(t, nil)
	c := tenant(t, ns)
	create := func(name string) time.Time {
		t.Helper()
		if _, err := c.CoreV1().Pods(ns).Create(context.Background(), driverPodNamed(t, ns, name), metav1.CreateOptions{}); err != nil {
			t.Fatalf("the tenant's driver %s was refused: %v", name, err)
		}
		return time.Now()
	}

	// A driver the tenant leaves alone is built through the lag: the replica leads (a stopped
	// replica's lease runs out first) and its cache works, only late.
	create("canary")
	waitFor(t, 90*time.Second, "the canary's StatefulSet", func(ctx context.Context) (bool, error) {
		_, err := kube().AppsV1().StatefulSets(ns).Get(ctx, contract.NamesFor("canary").StatefulSet, metav1.GetOptions{})
		return err == nil, nil
	})

	const name = "raced"
	created := create(name)
	if p := getPod(t, ns, name); p.Annotations[contract.AnnotationResources] == "" || p.Annotations["driverset.dev/seal"] == "" {
		t.Fatalf("the driver was not made a sealed placeholder: %v", p.Annotations)
	}
	time.Sleep(time.Until(created.Add(editAfter)))
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{contract.AnnotationResources: gpuResources}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("the tenant could not edit the recorded resources: %v", err)
	}
	if edited := time.Since(created); edited >= lag {
		t.Fatalf("the edit landed %v after the create, not within the %v lag: the race was not run", edited, lag)
	}
	noGPUDriver(t, c, ns, name, "does not match")
	// Two checks stand in the way, each on a live read: the controller's before it builds, and the
	// creates entry's on what driverset's token creates. The first must hold on its own: the
	// controller asked for no create that the entry then refused.
	body, err := metricsOf(replica)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := sample(body, seriesNotAsBuilt); n > 0 {
		t.Errorf("driverset's controller built from the edited placeholder: its creates entry refused %v create(s) of the result", n)
	}
}

const seriesNotAsBuilt = `driverset_admission_decisions_total{outcome="denied",reason="not-as-built",webhook="creates"}`
