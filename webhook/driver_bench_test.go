package webhook

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// BenchmarkDriverHandle is the CPU cost of one admission of spark-submit's driver pod by the
// driver handler, sealing included: on an idle core, what the webhook adds to a pod create beyond
// the network round trip (e2e's BenchmarkAdmissionLatency measures it through the apiserver).
// "apiserver" sends the pod as the apiserver does, encoded from the same types as the handler's;
// "other-encoder" sends it with its keys in another order, which takes the handler's long path
// (apply the diff to the request as sent, then diff again).
func BenchmarkDriverHandle(b *testing.B) {
	written := readPodJSON(b, filepath.Join("testdata", "spark-3.5.pod.yaml"))
	var pod corev1.Pod
	if err := json.Unmarshal(written, &pod); err != nil {
		b.Fatal(err)
	}
	encoded, err := json.Marshal(&pod)
	if err != nil {
		b.Fatal(err)
	}
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
