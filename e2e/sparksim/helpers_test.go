package sparksim

import (
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/driverset/driverset/e2e/sparksim/sparksimtest"
)

// fixedNow is the clock of every deterministic test: 2026-01-02T03:04:05.678Z.
func fixedNow() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC) }

func seeded(seed byte) io.Reader { return rand.NewChaCha8([32]byte{seed}) }

// testApp is a deterministic SparkPi submission of version v into namespace "apps".
func testApp(v Version) App {
	return App{Version: v, Name: "spark-pi", Namespace: "apps", Rand: seeded(1), Now: fixedNow}
}

// newFake is sparksimtest.NewFake.
func newFake(t *testing.T, objs ...runtime.Object) *fake.Clientset {
	t.Helper()
	return sparksimtest.NewFake(objs...)
}

// verbs lists "verb resource" of every action the fake saw, in order.
func verbs(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	return out
}
