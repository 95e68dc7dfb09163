package seal

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) //nolint:gochecknoglobals // a fixed instant for the table

func sealer(key string) Sealer {
	return Sealer{Key: []byte(strings.Repeat(key, MinKeyLen)), Now: func() time.Time { return t0 }}
}

func placeholder() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "spark", Name: "pi-driver", Annotations: map[string]string{
		contract.AnnotationResources: `{"spark-kubernetes-driver":{"requests":{"cpu":"1"}}}`,
	}}}
}

// TestVerify is the spec of a seal: it holds for the pod it was made for, near the time it was
// made, with the key that made it, and for nothing else.
func TestVerify(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(p *corev1.Pod)
		key    string
		at     time.Time
		reason string // "" means valid
		// signDry and checkDry: sealed, and checked, for a dry-run create.
		signDry, checkDry bool
	}{
		{name: "as sealed", at: t0},
		{name: "checked at the pod's creation, a minute later", at: t0.Add(time.Minute)},
		{name: "a GPU added to the recorded resources", at: t0, edit: func(p *corev1.Pod) {
			p.Annotations[contract.AnnotationResources] = `{"spark-kubernetes-driver":{"requests":{"cpu":"1","nvidia.com/gpu":"1"}}}`
		}, reason: "does not match"},
		{name: "the recorded resources removed", at: t0, edit: func(p *corev1.Pod) {
			delete(p.Annotations, contract.AnnotationResources)
		}, reason: "does not match"},
		{name: "moved to another pod name", at: t0, edit: func(p *corev1.Pod) { p.Name = "other-driver" }, reason: "does not match"},
		{name: "moved to another namespace", at: t0, edit: func(p *corev1.Pod) { p.Namespace = "other" }, reason: "does not match"},
		{name: "another key", key: "k", at: t0, reason: "does not match"},
		{name: "no seal", at: t0, edit: func(p *corev1.Pod) { delete(p.Annotations, Annotation) }, reason: "has no seal"},
		{name: "not a seal", at: t0, edit: func(p *corev1.Pod) { p.Annotations[Annotation] = "v1.x.y" }, reason: "is not driverset's"},
		{name: "another version", at: t0, edit: func(p *corev1.Pod) {
			p.Annotations[Annotation] = "v2" + strings.TrimPrefix(p.Annotations[Annotation], "v1")
		}, reason: "is not driverset's"},
		{name: "its time moved", at: t0, edit: func(p *corev1.Pod) {
			p.Annotations[Annotation] = strings.Replace(p.Annotations[Annotation], ".", ".1", 1)
		}, reason: "does not match"},
		{name: "replayed later onto a pod of the same name", at: t0.Add(MaxSkew + time.Second), reason: "from when the pod was created"},
		{name: "older than its pod by more than the skew", at: t0.Add(-MaxSkew - time.Second), reason: "from when the pod was created"},
		{name: "a dry-run's, checked again within the dry-run", at: t0, signDry: true, checkDry: true},
		{name: "a dry-run's, replayed onto a real create", at: t0, signDry: true, reason: "made for a dry-run create"},
		{name: "a real create's, checked as a dry-run's", at: t0, checkDry: true, reason: "does not match"},
		// Who it was made for: the policy driverset-seal-creator holds a create to it, so it
		// cannot be changed or dropped, and a NUL cannot pass one field off as several.
		{name: "made for another user", at: t0, edit: func(p *corev1.Pod) { p.Annotations[CreatorAnnotation] = "mallory" }, reason: "does not match"},
		{name: "its creator removed", at: t0, edit: func(p *corev1.Pod) { delete(p.Annotations, CreatorAnnotation) }, reason: "does not match"},
		{name: "its creator folded into the recorded resources", at: t0, edit: func(p *corev1.Pod) {
			p.Annotations[contract.AnnotationResources] += "\x00creator\x00" + p.Annotations[CreatorAnnotation]
			delete(p.Annotations, CreatorAnnotation)
		}, reason: "is not driverset's"},
		{name: "made before seals named their creator", at: t0, edit: func(p *corev1.Pod) {
			delete(p.Annotations, CreatorAnnotation)
			p.Annotations[Annotation] = version + "." + strconv.FormatInt(t0.Unix(), 10) + "." +
				base64.RawURLEncoding.EncodeToString(sealer("s").mac([]byte(strings.Repeat("s", MinKeyLen)), p.Namespace, p.Name, t0.Unix(), p))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := placeholder()
			signer := sealer("s")
			if tc.signDry {
				signer = signer.DryRun()
			}
			if err := signer.Sign(p, "alice"); err != nil {
				t.Fatal(err)
			}
			if tc.edit != nil {
				tc.edit(p)
			}
			key := "s"
			if tc.key != "" {
				key = tc.key
			}
			checker := sealer(key)
			if tc.checkDry {
				checker = checker.DryRun()
			}
			err := checker.Verify(p, tc.at)
			switch {
			case tc.reason == "" && err != nil:
				t.Fatalf("Verify = %v, want valid", err)
			case tc.reason != "" && (err == nil || !strings.Contains(err.Error(), tc.reason)):
				t.Fatalf("Verify = %v, want an error saying %q", err, tc.reason)
			}
		})
	}
}

// A pod named by generateName has no name at mutating admission (the apiserver picks it later):
// a seal then could only cover the empty name, and hold for any pod. No such seal is made, and one
// made so by an earlier driverset holds for no pod.
func TestNoSealWithoutAName(t *testing.T) {
	p := placeholder()
	p.Name, p.GenerateName = "", "pi-"
	if err := sealer("s").Sign(p, "alice"); err == nil || !strings.Contains(err.Error(), "has none yet") {
		t.Fatalf("Sign of a pod without a name = %v, want a refusal", err)
	}
	s := sealer("s")
	p.Annotations[Annotation] = version + "." + strconv.FormatInt(t0.Unix(), 10) + "." +
		base64.RawURLEncoding.EncodeToString(s.mac(s.Key, p.Namespace, "", t0.Unix(), p))
	p.Name = "pi-x7k2q"
	if err := s.Verify(p, t0); err == nil {
		t.Fatal("a seal made over no name holds for the name the apiserver generated")
	}
}

func TestNoKeySealsNothing(t *testing.T) {
	p := placeholder()
	if err := (Sealer{}).Sign(p, "alice"); err == nil {
		t.Fatal("Sign without a key succeeded")
	}
	if err := sealer("s").Sign(p, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := (Sealer{Key: []byte("short")}).Verify(p, t0); err == nil {
		t.Fatal("Verify with a short key succeeded")
	}
}

// A seal names the user whose create it was made in; a create that names none gets no seal.
func TestSealNamesItsCreator(t *testing.T) {
	p := placeholder()
	if err := sealer("s").Sign(p, ""); err == nil {
		t.Fatal("Sign for no creator succeeded")
	}
	if err := sealer("s").Sign(p, "alice"); err != nil || p.Annotations[CreatorAnnotation] != "alice" {
		t.Fatalf("Sign for alice: %v, annotations %v", err, p.Annotations)
	}
}
