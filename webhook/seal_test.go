package webhook

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/contract"
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
	if err := testSeal().Sign(p, "alice"); err != nil {
		panic(err)
	}
}

// TestSealIsForOneRealNamedCreate is the spec of which creates get a seal the controller (and the
// webhook's own re-invocation in a real create) accepts: only a real create of a named pod. A
// dry-run's seal holds within that dry-run only; a pod named by generateName has no name to seal.
func TestSealIsForOneRealNamedCreate(t *testing.T) {
	generated := func(p *corev1.Pod) { p.Name, p.GenerateName = "", "pi-" }
	tests := []struct {
		name string
		edit func(p *corev1.Pod)
		// enforced: the namespace-policy entry; firstDry, againDry: the first admission and the
		// second (its own placeholder, seen again) are dry-runs.
		enforced, notOptedIn, firstDry, againDry bool
		// againAs: the second admission is another user's (createRequest's is alice).
		againAs string
		want    string // "": allowed with no patch the second time; else the refusal (or warning)
	}{
		{name: "a real create, re-invoked"},
		{name: "a dry-run, re-invoked within the dry-run", firstDry: true, againDry: true},
		{name: "a dry-run's placeholder, posted for real", firstDry: true, want: "made for a dry-run create"},
		{name: "a placeholder posted again by another user", againAs: "mallory", want: "made for another user's create"},
		{name: "a placeholder posted again by another user, under the namespace policy", enforced: true, againAs: "mallory",
			want: "made for another user's create"},
		{name: "a generateName driver, opted in", edit: generated, want: "has no name (only generateName \"pi-\")"},
		{name: "a generateName driver under the namespace policy", edit: generated, enforced: true, notOptedIn: true,
			want: "runs as it is, without driverset"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := sparkDriver()
			if tc.edit != nil {
				tc.edit(pod)
			}
			if tc.notOptedIn {
				delete(pod.Labels, contract.LabelResilient)
			}
			d := &Driver{Seal: testSeal(), Enforced: tc.enforced}
			raw := encode(t, pod)
			first := d.Handle(context.Background(), createRequest(raw, tc.firstDry))
			if !first.Allowed {
				if tc.want == "" || !strings.Contains(first.Result.Message, tc.want) {
					t.Fatalf("refused: %s, want %q", first.Result.Message, tc.want)
				}
				return
			}
			if len(first.Patches) == 0 {
				if w := strings.Join(first.Warnings, "; "); tc.want == "" || !strings.Contains(w, tc.want) {
					t.Fatalf("left as it is with warnings %q, want %q", w, tc.want)
				}
				return
			}
			second := createRequest(applyPatch(t, raw, first.Patches), tc.againDry)
			if tc.againAs != "" {
				second.UserInfo.Username = tc.againAs
			}
			again := d.Handle(context.Background(), second)
			switch {
			case tc.want == "" && (!again.Allowed || len(again.Patches) != 0):
				t.Fatalf("its own placeholder seen again: allowed=%v patches=%v (%+v), want allowed unchanged", again.Allowed, again.Patches, again.Result)
			case tc.want != "" && (again.Allowed || !strings.Contains(again.Result.Message, tc.want)):
				t.Fatalf("its placeholder seen again: allowed=%v (%+v), want refused saying %q", again.Allowed, again.Result, tc.want)
			}
		})
	}
}
