package webhook

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/convert"
	"github.com/driverset/driverset/seal"
)

// testSeal is the handlers' sealer in the unit tests: a fixed key, and a fixed present, so that a
// golden file records the same seal on every run.
func testSeal() seal.Sealer {
	return seal.Sealer{
		Key: []byte(strings.Repeat("k", seal.MinKeyLen)),
		Now: func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) },
	}
}

// sealedPlaceholder turns p into the placeholder the handler makes of it, sealed with testSeal.
func sealedPlaceholder(p *corev1.Pod) {
	if err := convert.ToPlaceholder(p); err != nil {
		panic(err)
	}
	if err := testSeal().Sign(p); err != nil {
		panic(err)
	}
}
