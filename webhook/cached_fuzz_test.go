package webhook

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// FuzzCachedHandlers feeds arbitrary bytes as the pod of a CREATE request to the executor and the
// incarnation handler, each against its golden cache. Beyond admitted's contract: the executor
// handler never refuses, and an executor it patches is tied to a driver driverset runs; a new
// incarnation that is allowed while executors of its app exist in its namespace is held by the
// stale-executor gate (unless it is already bound to a node).
func FuzzCachedHandlers(f *testing.F) {
	executorCache := cacheFrom(f, filepath.Join("testdata", "executor", "cache.yaml"))
	incarnationCache := cacheFrom(f, filepath.Join("testdata", "incarnation", "cache.yaml"))
	executors := &Executor{Reader: executorCache}
	incarnations := &Incarnation{Reader: incarnationCache}
	// Small seeds first: the fuzzer minimizes every new input, which is slow for a full pod.
	// testdata/fuzz/FuzzCachedHandlers holds the inputs the fuzzer found.
	f.Add([]byte(`{"metadata":{"namespace":"analytics","labels":{"spark-role":"executor"},"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"spark-pi-8e3c5a1f0b7d2e49-driver","uid":"6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f","controller":true}]},"spec":{"containers":[{"name":"e","env":[{"name":"SPARK_DRIVER_URL","value":"spark://CoarseGrainedScheduler@10.0.0.1:7078"}]}]}}`), false)
	f.Add([]byte(`{"metadata":{"namespace":"analytics","labels":{"spark-role":"driver","driverset.dev/driver":"spark-pi-8e3c5a1f0b7d2e49-driver","spark-app-selector":"spark-8f2c1d4e6a7b4c9d8e0f1a2b3c4d5e6f"}},"spec":{"schedulingGates":null}}`), true)
	f.Add([]byte(`{"metadata":{"labels":null},"spec":{"containers":null}}`), false)
	f.Add([]byte(`null`), true)
	for _, p := range []struct {
		path        string
		incarnation bool
	}{
		{filepath.Join("testdata", "executor", "spark-4.1-use-driver-pod-ip.pod.yaml"), false},
		{filepath.Join("testdata", "incarnation", "spark-3.5-stale-executors.pod.yaml"), true},
	} {
		y, err := os.ReadFile(p.path)
		if err != nil {
			f.Fatal(err)
		}
		raw, err := yaml.YAMLToJSON(y)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw, p.incarnation)
		f.Add(raw[:len(raw)/2], p.incarnation)
	}
	f.Fuzz(func(t *testing.T, raw []byte, incarnation bool) {
		var h admission.Handler = executors
		if incarnation {
			h = incarnations
		}
		resp, out := admitted(t, h, raw)
		in := decodedPod(raw)
		if !incarnation {
			if !resp.Allowed {
				t.Fatalf("an executor was refused: %+v", resp.Result)
			}
			if len(resp.Patches) != 0 && (out == nil || out.Labels[contract.LabelDriver] == "") {
				t.Fatalf("a patched executor is not tied to a driverset driver: %+v", out)
			}
			return
		}
		if !resp.Allowed || in == nil {
			return
		}
		app, reason := incarnationApp(in)
		if reason != "" || in.Spec.NodeName != "" {
			return
		}
		ns := in.Namespace
		if ns == "" {
			ns = createRequest(raw, false).Namespace
		}
		if !staleExecutorsExist(t, incarnationCache, ns, app) {
			return
		}
		if out == nil || !convert.HasGate(&out.Spec, contract.GateStaleExecutors) {
			t.Fatalf("a new incarnation allowed while executors of app %s exist in %q is not held: %+v", app, ns, out)
		}
	})
}

// staleExecutorsExist: the cache holds executor pods of app in namespace ns.
func staleExecutorsExist(t *testing.T, r client.Reader, ns, app string) bool {
	t.Helper()
	var list corev1.PodList
	if err := r.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{
		contract.LabelSparkAppSelector: app, contract.LabelSparkRole: contract.RoleExecutor,
	}); err != nil {
		t.Fatal(err)
	}
	return len(list.Items) > 0
}
