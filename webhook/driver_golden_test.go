package webhook

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
	jsonpatch4 "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml from the current output")

// summary is what a golden file records of one admission: the verdict, and the pod the apiserver
// would persist after applying the patch to the request's raw object.
type summary struct {
	Allowed  bool     `json:"allowed"`
	Code     int32    `json:"code,omitempty"`
	Message  string   `json:"message,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// Patch lists each operation as "op path", sorted (the library's order is not stable).
	Patch []string        `json:"patch,omitempty"`
	Pod   json.RawMessage `json:"pod,omitempty"`
}

// TestDriverGolden admits every testdata/<case>.pod.yaml with the handler and compares the outcome
// with testdata/<case>.golden.yaml (`go test ./webhook -run Golden -update` rewrites them). Cases
// named "*-enforced" go to the namespace-policy handler.
func TestDriverGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.pod.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no testdata/*.pod.yaml: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".pod.yaml")
		t.Run(name, func(t *testing.T) {
			d := &Driver{Seal: testSeal(), Enforced: strings.HasSuffix(name, "-enforced")}
			checkGolden(t, d, readPodJSON(t, in), filepath.Join("testdata", name+".golden.yaml"))
		})
	}
}

func readPodJSON(t testing.TB, path string) []byte {
	t.Helper()
	y, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return j
}

// createRequest is the AdmissionRequest the apiserver sends for a pod CREATE in the pod's namespace.
func createRequest(raw []byte, dryRun bool) admission.Request {
	var meta struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	// Decoded as the apiserver decodes the pod (case-sensitive keys): its namespace is the
	// request's. Malformed input is the handler's to report.
	_ = sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &meta)
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:         "0b3ab7e2-6f4c-4b8e-9a1d-2c3e4f5a6b7c",
		Kind:        metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:    metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		RequestKind: &metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Name:        meta.Metadata.Name,
		Namespace:   meta.Metadata.Namespace,
		Operation:   admissionv1.Create,
		Object:      runtime.RawExtension{Raw: raw},
		DryRun:      &dryRun,
		UserInfo:    authenticationv1.UserInfo{Username: "alice"},
	}}
}

// applyPatch applies the handler's patch to the raw request object as the apiserver does, with the
// apiserver's own patch library (gopkg.in/evanphx/json-patch.v4); it fails the test when the patch
// does not apply.
func applyPatch(t *testing.T, raw []byte, ops []jsonpatch.JsonPatchOperation) []byte {
	t.Helper()
	if len(ops) == 0 {
		return raw
	}
	b, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch4.DecodePatch(b)
	if err != nil {
		t.Fatalf("decoding the handler's patch: %v", err)
	}
	out, err := p.Apply(raw)
	if err != nil {
		t.Fatalf("the handler's patch does not apply to the request's object: %v\n%s", err, b)
	}
	return out
}

func summarize(t *testing.T, raw []byte, resp admission.Response) []byte {
	t.Helper()
	s := summary{Allowed: resp.Allowed, Warnings: resp.Warnings}
	if resp.Result != nil {
		s.Code, s.Message = resp.Result.Code, resp.Result.Message
	}
	for _, op := range resp.Patches {
		s.Patch = append(s.Patch, op.Operation+" "+op.Path)
	}
	sort.Strings(s.Patch)
	if resp.Allowed {
		s.Pod = applyPatch(t, raw, resp.Patches)
	}
	j, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		t.Fatal(err)
	}
	return y
}

// normalized orders a response's patch so two responses can be compared.
func normalized(r admission.Response) admission.Response {
	r.Patches = append([]jsonpatch.JsonPatchOperation(nil), r.Patches...)
	sort.Slice(r.Patches, func(i, j int) bool { return r.Patches[i].Path < r.Patches[j].Path })
	return r
}

// sealValue is a seal as the annotation holds it.
var sealValue = regexp.MustCompile(`v1\.[0-9]+\.[A-Za-z0-9_-]{43}`) //nolint:gochecknoglobals // compiled once

// sealBlind is r, normalized and encoded, with every seal replaced by the same mark: a dry-run is
// answered as a real create is, but for its seal, which holds only within that dry-run.
func sealBlind(t *testing.T, r admission.Response) string {
	t.Helper()
	b, err := json.Marshal(normalized(r))
	if err != nil {
		t.Fatal(err)
	}
	return sealValue.ReplaceAllString(string(b), "<seal>")
}

// diffLines is a short line diff for golden mismatches.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("- " + wl + "\n+ " + gl + "\n")
		}
	}
	return b.String()
}

// checkGolden is the golden-file test of one admission: the handler's answer to raw, summarized,
// must equal the golden file (-update rewrites it); the patched pod admitted again must need no
// patch (idempotency), and a dry-run must be answered the same.
func checkGolden(t *testing.T, h admission.Handler, raw []byte, golden string) {
	t.Helper()
	checkGoldenDry(t, h, raw, raw, golden)
}

// checkGoldenDry is checkGolden where the dry-run's request is dryRaw: the pod as the same steps
// leave it in a dry-run, whose placeholder carries a dry-run's seal.
func checkGoldenDry(t *testing.T, h admission.Handler, raw, dryRaw []byte, golden string) {
	t.Helper()
	resp := h.Handle(context.Background(), createRequest(raw, false))
	got := summarize(t, raw, resp)
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the handler's output (run with -update to accept it):\n%s", golden, diffLines(string(want), string(got)))
	}
	t.Run("idempotent", func(t *testing.T) {
		if !resp.Allowed {
			t.Skip("refused: nothing to apply")
		}
		again := h.Handle(context.Background(), createRequest(applyPatch(t, raw, resp.Patches), false))
		if !again.Allowed || len(again.Patches) != 0 {
			t.Errorf("second admission of the patched pod: allowed=%v patches=%v, want allowed with no patch", again.Allowed, again.Patches)
		}
	})
	t.Run("as the apiserver encodes it", func(t *testing.T) {
		// The apiserver sends the pod encoded from the same types: byte for byte what the
		// handler's own re-encoding gives, which takes the handler's short path. The pod it
		// persists and the verdict must be those of the request as written.
		var pod corev1.Pod
		if err := json.Unmarshal(raw, &pod); err != nil {
			t.Skip("not a pod: nothing to re-encode")
		}
		encoded, err := json.Marshal(&pod)
		if err != nil {
			t.Fatal(err)
		}
		short := h.Handle(context.Background(), createRequest(encoded, false))
		if short.Allowed != resp.Allowed || !reflect.DeepEqual(short.Result, resp.Result) || !reflect.DeepEqual(short.Warnings, resp.Warnings) {
			t.Fatalf("answered\n%+v\nwant the verdict of the request as written\n%+v", short.AdmissionResponse, resp.AdmissionResponse)
		}
		if !resp.Allowed {
			return
		}
		// The apiserver applies the patch with a library that decodes and re-encodes every
		// object on each op's path: whole top-level fields cost it half as much as deep ops.
		for _, op := range short.Patches {
			if strings.Count(op.Path, "/") != 1 {
				t.Errorf("op %s %s: want whole top-level fields on the short path", op.Operation, op.Path)
			}
		}
		var want, got corev1.Pod
		if err := json.Unmarshal(applyPatch(t, raw, resp.Patches), &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(applyPatch(t, encoded, short.Patches), &got); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("persists\n%+v\nwant\n%+v", got, want)
		}
	})
	t.Run("dry-run", func(t *testing.T) {
		dry := h.Handle(context.Background(), createRequest(dryRaw, true))
		if got, want := sealBlind(t, dry), sealBlind(t, resp); got != want {
			t.Errorf("dry-run answered\n%s\nwant the same as without dry-run but for the seal\n%s", got, want)
		}
	})
}
