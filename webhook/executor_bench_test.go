package webhook

import (
	"encoding/json"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// BenchmarkExecutorServe is the CPU cost of one whole admission by the executors webhook, as
// BenchmarkDriverServe is the driver's: the entry is called for every Spark executor in the
// cluster, so "other-app" (an executor of an app that did not opt in, allowed unchanged) is what
// driverset costs every tenant's executors, and "owned-by-s0" what it costs its own.
func BenchmarkExecutorServe(b *testing.B) {
	for _, bc := range []struct{ name, file, want string }{
		{"other-app", "other-app.pod.yaml", `"allowed":true`},
		{"owned-by-s0", "spark-3.5-owned-by-s0.pod.yaml", `"patch":`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var pod corev1.Pod
			if err := json.Unmarshal(readPodJSON(b, filepath.Join("testdata", "executor", bc.file)), &pod); err != nil {
				b.Fatal(err)
			}
			encoded, err := json.Marshal(&pod)
			if err != nil {
				b.Fatal(err)
			}
			cache := cacheFrom(b, filepath.Join("testdata", "executor", "cache.yaml"))
			benchServe(b, &Executor{Reader: cache}, ExecutorPath, encoded, bc.want)
		})
	}
}
