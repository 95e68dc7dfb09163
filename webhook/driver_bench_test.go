package webhook

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkDriverHandle is the CPU cost of one admission of spark-submit's driver pod by the
// driver handler, sealing included: on an idle core, what the webhook adds to a pod create beyond
// the network round trip (e2e's BenchmarkAdmissionLatency measures it through the apiserver).
func BenchmarkDriverHandle(b *testing.B) {
	raw := readPodJSON(b, filepath.Join("testdata", "spark-3.5.pod.yaml"))
	d := &Driver{Seal: testSeal()}
	req := createRequest(raw, false)
	b.ReportAllocs()
	for b.Loop() {
		if resp := d.Handle(context.Background(), req); !resp.Allowed || len(resp.Patches) == 0 {
			b.Fatalf("not converted: %+v", resp.Result)
		}
	}
}
