//go:build testbed

package install

import (
	"path"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driverset/driverset/seal"
)

// Every install makes the seal key with the Job driverset-make-seal-key, as its own ServiceAccount,
// a pod no selector of the install picks, ending by a TTL; and mounts the Secret, not optional (a pod waits for it in ContainerCreating), where
// serve reads it by default (seal.DefaultKeyFile). Its RBAC: TestRBACGrantsExactlyTheAllowList.
func TestEveryInstallMakesAndMountsTheSealKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		objs func(t *testing.T) []*unstructured.Unstructured
	}{
		{"install.yaml", func(t *testing.T) []*unstructured.Unstructured { return readInstallYAML(t) }},
		{"overlays/cert-manager", func(t *testing.T) []*unstructured.Unstructured { return render(t, "overlays/cert-manager") }},
		{"overlays/namespaced", func(t *testing.T) []*unstructured.Unstructured { return render(t, namespacedOverlay) }},
		{"chart, every optional object", func(t *testing.T) []*unstructured.Unstructured {
			return mustRenderChart(t, systemNamespace, withAllObjects(map[string]any{}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := tc.objs(t)
			job := find(t, objs, "Job", sealKeyMaker)
			spec := podSpec(t, job)
			expect(t, spec, sealKeyMaker, "serviceAccountName")
			expect(t, container(t, spec), []any{"make-seal-key"}, "args")
			expect(t, job.Object, int64(60), "spec", "ttlSecondsAfterFinished")
			podLabels, _, _ := unstructured.NestedStringMap(job.Object, "spec", "template", "metadata", "labels")
			expectNotSelected(t, objs, "the key-maker's pod", podLabels)

			deploy := podSpec(t, find(t, objs, "Deployment", "driverset"))
			var volume map[string]any
			vols, _ := deploy["volumes"].([]any)
			for _, v := range vols {
				if m := v.(map[string]any); m["name"] == "seal-key" {
					volume = m
				}
			}
			if volume == nil {
				t.Fatal("the Deployment has no volume seal-key")
			}
			expect(t, volume, "driverset-seal", "secret", "secretName")
			if optional, found, _ := unstructured.NestedBool(volume, "secret", "optional"); found && optional {
				t.Error("the seal key's volume is optional: a replica would start without it and wait for the kubelet's next sync")
			}
			expect(t, volume, []any{map[string]any{"key": seal.KeyField, "path": path.Base(seal.DefaultKeyFile)}}, "secret", "items")
			mounted := false
			mounts, _ := container(t, deploy)["volumeMounts"].([]any)
			for _, m := range mounts {
				if m := m.(map[string]any); m["name"] == "seal-key" {
					mounted = m["mountPath"] == path.Dir(seal.DefaultKeyFile) && m["readOnly"] == true
				}
			}
			if !mounted {
				t.Errorf("the Deployment's container does not mount seal-key read-only at %s: %v", path.Dir(seal.DefaultKeyFile), mounts)
			}
		})
	}
}
