//go:build testbed

package e2e

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/driverset/driverset/contract"
)

// docs/install.md's ValidatingAdmissionPolicy for admins who keep GPUs to group ml themselves,
// applied as written (its binding scoped to this test's namespace): it reads the placeholder's
// driverset.dev/resources and the request's user. A tenant with `edit` outside group ml who opts a
// GPU driver in is refused with the policy's message; one in group ml is admitted, and S-0, which
// kube-controller-manager creates, gets its GPUs.
func TestGPUPolicyReadsThePlaceholder(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	c := tenant(t, ns)
	applyDocumentedGPUPolicy(t, ns)

	waitFor(t, 60*time.Second, "the policy refusing a GPU driver outside group ml", func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().Pods(ns).Create(ctx, gpuDriver(t, ns, "not-ml"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "only group ml may request nvidia.com/gpu"), nil
	})
	_, err := c.CoreV1().Pods(ns).Create(ctx, gpuDriver(t, ns, "not-ml"), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "only group ml may request nvidia.com/gpu") {
		t.Fatalf("a GPU driver outside group ml was answered %v, want the policy's refusal", err)
	}
	t.Logf("refused: %v", err)

	cfg := rest.CopyConfig(bed.cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "tenant-of-" + ns, Groups: []string{"system:authenticated", "ml"}}
	ml, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ml.CoreV1().Pods(ns).Create(ctx, gpuDriver(t, ns, "in-ml"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a GPU driver of group ml was refused: %v", err)
	}
	names := contract.NamesFor("in-ml")
	waitFor(t, 60*time.Second, "S-0 of group ml's driver", func(ctx context.Context) (bool, error) {
		_, err := kube().CoreV1().Pods(ns).Get(ctx, names.DriverPodName(), metav1.GetOptions{})
		return err == nil, nil
	})
	for _, ct := range getPod(t, ns, names.DriverPodName()).Spec.Containers {
		if q := ct.Resources.Limits[gpu]; ct.Name == contract.DriverContainerName && q.String() != "8" {
			t.Errorf("S-0's driver container has %s GPUs in its limits, want 8", q.String())
		}
	}
}

// applyDocumentedGPUPolicy creates the objects of docs/install.md's yaml block that holds the
// policy gpus-for-ml-only, its binding matching ns only, and deletes them when the test ends.
func applyDocumentedGPUPolicy(t *testing.T, ns string) {
	t.Helper()
	doc, err := os.ReadFile("../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for i, part := range strings.Split(string(doc), "```yaml\n") {
		body, _, _ := strings.Cut(part, "```")
		if i > 0 && strings.Contains(body, "kind: ValidatingAdmissionPolicy\n") && strings.Contains(body, "gpus-for-ml-only") {
			block = body
		}
	}
	if block == "" {
		t.Fatal("docs/install.md has no yaml block with the policy gpus-for-ml-only")
	}
	dyn, err := dynamic.NewForConfig(bed.cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, y := range bytes.Split([]byte(block), []byte("\n---\n")) {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal(y, &u.Object); err != nil {
			t.Fatal(err)
		}
		resource := "validatingadmissionpolicies"
		if u.GetKind() == "ValidatingAdmissionPolicyBinding" {
			resource = "validatingadmissionpolicybindings"
			if err := unstructured.SetNestedStringMap(u.Object, map[string]string{"kubernetes.io/metadata.name": ns},
				"spec", "matchResources", "namespaceSelector", "matchLabels"); err != nil {
				t.Fatal(err)
			}
		}
		r := dyn.Resource(schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: resource})
		if _, err := r.Create(context.Background(), &u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		t.Cleanup(func() { _ = r.Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
	}
}
