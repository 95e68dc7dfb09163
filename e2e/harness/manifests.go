// Package harness runs driverset itself on the test bed: it builds the binary, starts
// `driverset serve` as a local process with its own serving certificate, and installs
// driverset's manifests (the local overlay) into the test bed's apiserver.
package harness

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/contract"
)

// FieldOwner is the server-side-apply field manager of everything the harness applies.
const FieldOwner = "driverset-e2e"

// Render runs `kubectl kustomize` on a folder of manifests/ (e.g. "overlays/local") and returns
// its objects. kubectl comes from the test bed's binaries.
func Render(ctx context.Context, kubectl, overlay string) ([]*unstructured.Unstructured, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kubectl, "kustomize", filepath.Join(root, "manifests", overlay))
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kubectl kustomize %s: %w: %s", overlay, err, stderr.String())
	}
	return Decode(&out)
}

// Decode reads a multi-document YAML stream.
func Decode(r io.Reader) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// Apply applies objs server-side, in order, as FieldOwner.
func Apply(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	for _, u := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// InstallLocal renders the local overlay, points its webhooks at https://127.0.0.1:port with
// caBundle, applies it, and waits until the apiserver calls the webhook (see WaitWebhookActive
// for alive).
func InstallLocal(ctx context.Context, cfg *rest.Config, alive Liveness, kubectl string, port int, caBundle []byte) error {
	objs, err := Render(ctx, kubectl, "overlays/local")
	if err != nil {
		return err
	}
	for _, u := range objs {
		if u.GetKind() != "MutatingWebhookConfiguration" {
			continue
		}
		hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
		for i := range hooks {
			h := hooks[i].(map[string]any)
			cc := h["clientConfig"].(map[string]any)
			if url, ok := cc["url"].(string); ok {
				cc["url"] = strings.Replace(url, "127.0.0.1:9443", fmt.Sprintf("127.0.0.1:%d", port), 1)
			}
			cc["caBundle"] = base64.StdEncoding.EncodeToString(caBundle)
		}
		if err := unstructured.SetNestedSlice(u.Object, hooks, "webhooks"); err != nil {
			return err
		}
	}
	if err := Apply(ctx, cfg, objs); err != nil {
		return err
	}
	return WaitWebhookActive(ctx, cfg, alive)
}

// InstallLocalAccess applies what driverset needs before it starts, as install.yaml does before its
// pods run: every object of the local overlay but the webhook configuration (which names the
// running process's port and CA; InstallLocal applies it). Without its RBAC, driverset's informer
// caches cannot fill, and it is never ready.
func InstallLocalAccess(ctx context.Context, cfg *rest.Config, kubectl string) error {
	objs, err := Render(ctx, kubectl, "overlays/local")
	if err != nil {
		return err
	}
	var access []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() != "MutatingWebhookConfiguration" {
			access = append(access, u)
		}
	}
	return Apply(ctx, cfg, access)
}

// WaitWebhookActive waits until a dry-run create of an opted-in driver pod comes back converted:
// only then does the apiserver call driverset for real pods. It fails at once when alive (the
// cluster's liveness check; nil: none) reports a component down for good, which no retry of
// the create would outlast.
func WaitWebhookActive(ctx context.Context, cfg *rest.Config, alive Liveness) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			// Named: driverset refuses a driver pod without a name (it seals the placeholder by it). A
			// dry-run leaves nothing, so one name serves every probe.
			Name:   "driverset-probe",
			Labels: map[string]string{contract.LabelSparkRole: contract.RoleDriver, contract.LabelResilient: "true"},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: contract.DriverContainerName, Image: "probe",
				Args: []string{"driver", "--properties-file", "/opt/spark/conf/spark.properties", "--class", "Probe", "probe.jar"},
			}},
		},
	}
	var last error
	err = alive.poll(ctx, 200*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Pods("default").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err
			return false, nil
		}
		return got.Labels[contract.LabelPlaceholder] == "true", nil
	})
	if err != nil {
		return fmt.Errorf("driverset's webhook did not become active: %w (last error: %v)", err, last)
	}
	return nil
}

// DeploymentEnv returns the environment variables with a plain value that install.yaml's
// driverset Deployment gives its container (NAME=value; those taken from the pod or its resources
// are left out), for a driverset the harness runs to run as installed.
func DeploymentEnv(installYAML io.Reader) ([]string, error) {
	c, err := deploymentContainer(installYAML)
	if err != nil {
		return nil, err
	}
	var env []string
	list, _, _ := unstructured.NestedSlice(c, "env")
	for _, e := range list {
		e, ok := e.(map[string]any)
		if v, plain := e["value"].(string); ok && plain {
			env = append(env, fmt.Sprintf("%v=%s", e["name"], v))
		}
	}
	return env, nil
}

// DeploymentMemoryLimit is the memory limit, in bytes, that install.yaml's driverset Deployment
// gives its container: past it the kubelet kills a replica.
func DeploymentMemoryLimit(installYAML io.Reader) (int64, error) {
	c, err := deploymentContainer(installYAML)
	if err != nil {
		return 0, err
	}
	v, ok, _ := unstructured.NestedString(c, "resources", "limits", "memory")
	if !ok {
		return 0, errors.New("the driverset container has no memory limit")
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, err
	}
	return q.Value(), nil
}

// deploymentContainer is the container driverset of install.yaml's Deployment driverset.
func deploymentContainer(installYAML io.Reader) (map[string]any, error) {
	objs, err := Decode(installYAML)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != "driverset" {
			continue
		}
		containers, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if err != nil {
			return nil, err
		}
		for _, c := range containers {
			if c, ok := c.(map[string]any); ok && c["name"] == "driverset" {
				return c, nil
			}
		}
	}
	return nil, errors.New("no Deployment driverset with a container driverset")
}
