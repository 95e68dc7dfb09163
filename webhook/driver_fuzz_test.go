package webhook

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// FuzzHandle feeds arbitrary bytes as the pod of a CREATE request to the driver handler, opted
// in by label or by the namespace policy. Beyond admitted's contract: a Spark driver opted in with
// the label is either refused or becomes the gated placeholder, with its marks; under the
// namespace policy, a Spark driver that is allowed is converted the same way, or says in a
// warning that it runs without driverset. A refusal is only ever convert's reason, about a pod
// it cannot convert: a handler that refused every driver would pass the rest.
func FuzzHandle(f *testing.F) {
	// Small seeds: the fuzzer minimizes every new input, which is slow for a full Spark pod.
	small, err := json.Marshal(sparkDriver())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(small, false)
	f.Add(small, true)
	f.Add(small[:len(small)/2], true)
	y, err := os.ReadFile(filepath.Join("testdata", "spark-3.5.pod.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	full, err := yaml.YAMLToJSON(y)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(full, false)
	f.Add([]byte(`{"metadata":{"labels":{"spark-role":"driver"}},"spec":{"containers":[{"name":"spark-kubernetes-driver","args":["driver"]}]}}`), true)
	f.Add([]byte(`{"metadata":{"labels":{"spark-role":"driver","driverset.dev/resilient":"true"}},"spec":{"containers":[{"name":"x","args":["driver"]}]}}`), false)
	f.Add([]byte(`{"metadata":{"labels":{"spark-role":"driver","driverset.dev/resilient":"true"}},"spec":null}`), false)
	f.Add([]byte(`{"metadata":{"labels":null},"spec":{"containers":null}}`), true)
	f.Add([]byte(`null`), false)
	f.Fuzz(func(t *testing.T, raw []byte, enforced bool) {
		resp, out := admitted(t, &Driver{Seal: testSeal(), Enforced: enforced}, raw)
		in := decodedPod(raw)
		if !resp.Allowed {
			refusedOnlyWhatCannotBeConverted(t, in, resp)
			return
		}
		if in == nil || in.Labels[contract.LabelSparkRole] != contract.RoleDriver || hasLabel(in, contract.LabelDriver) {
			return
		}
		optedIn := in.Labels[contract.LabelResilient] == "true"
		if !optedIn && !enforced {
			if len(resp.Patches) != 0 {
				t.Fatalf("a driver that did not opt in was patched: %v", resp.Patches)
			}
			return
		}
		if !optedIn && len(resp.Patches) == 0 && !convert.IsPlaceholder(in) {
			for _, w := range resp.Warnings {
				if strings.Contains(w, "runs as it is, without driverset") {
					return
				}
			}
			t.Fatalf("under the namespace policy, a driver was allowed unconverted without a warning: %+v", resp.Result)
		}
		if out == nil || !convert.HasGate(&out.Spec, contract.GatePlaceholder) || !convert.IsPlaceholder(out) ||
			out.Labels[contract.LabelPlaceholder] != "true" {
			t.Fatalf("an allowed opted-in driver is not a gated placeholder with its marks: %+v\npatched pod: %+v", resp.Result, out)
		}
		if _, ok := out.Annotations[contract.AnnotationResources]; !ok && !convert.IsPlaceholder(in) {
			t.Fatalf("the placeholder does not record the driver's resources: annotations %v", out.Annotations)
		}
	})
}

// refusedOnlyWhatCannotBeConverted: a decodable pod is refused only with a 403 whose message is the
// reason convert gives for that very pod; an undecodable one only with a 400.
func refusedOnlyWhatCannotBeConverted(t *testing.T, in *corev1.Pod, resp admission.Response) {
	t.Helper()
	if resp.Result == nil {
		t.Fatalf("a refusal without a status: %+v", resp)
	}
	if in == nil {
		if resp.Result.Code != http.StatusBadRequest {
			t.Fatalf("an undecodable pod was answered %d, want 400: %s", resp.Result.Code, resp.Result.Message)
		}
		return
	}
	if convert.IsPlaceholder(in) && testSeal().VerifyNow(in) != nil {
		// A placeholder the handler did not seal is refused before convert is asked.
		if resp.Result.Code != http.StatusForbidden || !strings.Contains(resp.Result.Message, "arrives shaped as a driverset placeholder") {
			t.Fatalf("an unsealed placeholder was refused with %d %q, want 403 saying it arrives shaped as one", resp.Result.Code, resp.Result.Message)
		}
		return
	}
	var nc *convert.NotConvertible
	if err := convert.ToPlaceholder(in.DeepCopy()); err == nil && in.Name == "" {
		// Convertible, but with no name to seal it by.
		nc = unnamed(in)
	} else if !errors.As(err, &nc) {
		t.Fatalf("refused (%d: %s) a pod that convert converts (error %v)", resp.Result.Code, resp.Result.Message, err)
	}
	want := nc.Error()
	if convert.IsPlaceholder(in) {
		// Its own placeholder, changed since by a later webhook: the reason says so.
		want += changedPlaceholder
	}
	if resp.Result.Code != http.StatusForbidden || resp.Result.Message != want {
		t.Fatalf("refused with %d %q, want 403 with convert's reason %q", resp.Result.Code, resp.Result.Message, want)
	}
}
