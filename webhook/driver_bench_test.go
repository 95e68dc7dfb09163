package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	jsonpatch4 "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// BenchmarkDriverHandle is the CPU cost of one admission of spark-submit's driver pod by the
// driver handler, sealing included: on an idle core, what the webhook adds to a pod create beyond
// the network round trip (e2e's BenchmarkAdmissionLatency measures it through the apiserver).
// "apiserver" sends the pod as the apiserver does, encoded from the same types as the handler's;
// "other-encoder" sends it with its keys in another order, which takes the handler's long path
// (apply the diff to the request as sent, then diff again).
func BenchmarkDriverHandle(b *testing.B) {
	written, encoded := benchPod(b)
	for _, bc := range []struct {
		name string
		raw  []byte
	}{{"apiserver", encoded}, {"other-encoder", written}} {
		b.Run(bc.name, func(b *testing.B) {
			d := &Driver{Seal: testSeal()}
			req := createRequest(bc.raw, false)
			b.ReportAllocs()
			for b.Loop() {
				if resp := d.Handle(context.Background(), req); !resp.Allowed || len(resp.Patches) == 0 {
					b.Fatalf("not converted: %+v", resp.Result)
				}
			}
		})
	}
}

// BenchmarkDriverServe is the CPU cost of one whole admission as the apiserver's call reaches
// driverset's handler chain: the AdmissionReview decoded, the driver handler run, the answer's
// patch encoded and the AdmissionReview written back (controller-runtime's admission.Webhook),
// everything but TLS and the socket. BenchmarkDriverHandle is the handler's share of it.
func BenchmarkDriverServe(b *testing.B) {
	_, encoded := benchPod(b)
	benchServe(b, &Driver{Seal: testSeal()}, DriverPath, encoded, `"patch":`)
}

// benchServe times whole admissions of the pod raw (a CREATE) by handler, served at path through
// controller-runtime's admission.Webhook, as the apiserver's call reaches it; each answer must
// hold want.
func benchServe(b *testing.B, handler admission.Handler, path string, raw []byte, want string) {
	b.Helper()
	req := createRequest(raw, false)
	review, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &req.AdmissionRequest,
	})
	if err != nil {
		b.Fatal(err)
	}
	hook := &admission.Webhook{Handler: handler}
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(review))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		hook.ServeHTTP(w, r)
		if w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), []byte(want)) {
			b.Fatalf("not the answer wanted (%s): %d %s", want, w.Code, w.Body.Bytes())
		}
	}
}

// BenchmarkApiserverApply is the apiserver's CPU for applying the driver handler's answer to
// spark-submit's driver pod, as its mutating webhook dispatcher does it: decode the patch, apply
// it to the object's JSON with gopkg.in/evanphx/json-patch.v4, decode the result. "apiserver" is
// the answer to the pod as the apiserver encodes it (whole top-level fields, fieldPatch);
// "other-encoder" the answer to one written by another encoder (the library's deep ops), which
// is what every answer was before fieldPatch.
func BenchmarkApiserverApply(b *testing.B) {
	written, encoded := benchPod(b)
	d := &Driver{Seal: testSeal()}
	for _, bc := range []struct {
		name string
		raw  []byte
	}{{"apiserver", encoded}, {"other-encoder", written}} {
		b.Run(bc.name, func(b *testing.B) {
			resp := d.Handle(context.Background(), createRequest(bc.raw, false))
			ops, err := json.Marshal(resp.Patches)
			if err != nil || len(resp.Patches) == 0 {
				b.Fatalf("not converted: %v %+v", err, resp.Result)
			}
			b.ReportAllocs()
			for b.Loop() {
				p, err := jsonpatch4.DecodePatch(ops)
				if err != nil {
					b.Fatal(err)
				}
				out, err := p.Apply(encoded)
				if err != nil {
					b.Fatal(err)
				}
				var converted corev1.Pod
				if err := json.Unmarshal(out, &converted); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchPod is spark-submit's driver pod as written in testdata and as the apiserver encodes it.
func benchPod(b *testing.B) (written, encoded []byte) {
	b.Helper()
	written = readPodJSON(b, filepath.Join("testdata", "spark-3.5.pod.yaml"))
	var pod corev1.Pod
	if err := json.Unmarshal(written, &pod); err != nil {
		b.Fatal(err)
	}
	encoded, err := json.Marshal(&pod)
	if err != nil {
		b.Fatal(err)
	}
	return written, encoded
}
