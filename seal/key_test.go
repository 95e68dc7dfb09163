package seal

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestMakeKey is the key-maker's spec: a key is made only where there is none, and one that
// exists (an upgrade's, or the first run's) is never read nor changed: its ServiceAccount may only
// create Secrets.
func TestMakeKey(t *testing.T) {
	existing := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "driverset-system", Name: "driverset-seal"},
		Data: map[string][]byte{KeyField: []byte(strings.Repeat("old", MinKeyLen))}}
	for _, tc := range []struct {
		name      string
		objects   []runtime.Object
		wantMade  bool
		wantOld   bool // the Secret holds existing's key afterwards
		wantVerbs []string
	}{
		{"absent: made with a random key", nil, true, false, []string{"create"}},
		{"present: left as it is, not even read", []runtime.Object{existing.DeepCopy()}, false, true, []string{"create"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(tc.objects...)
			made, err := MakeKey(context.Background(), c, "driverset-system", "driverset-seal")
			if err != nil {
				t.Fatal(err)
			}
			if made != tc.wantMade {
				t.Errorf("made = %v, want %v", made, tc.wantMade)
			}
			var verbs []string
			for _, a := range c.Actions() {
				verbs = append(verbs, a.GetVerb())
			}
			if strings.Join(verbs, ",") != strings.Join(tc.wantVerbs, ",") {
				t.Errorf("verbs %v, want %v", verbs, tc.wantVerbs)
			}
			s, err := c.CoreV1().Secrets("driverset-system").Get(context.Background(), "driverset-seal", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			key := s.Data[KeyField]
			if old := string(key) == string(existing.Data[KeyField]); old != tc.wantOld {
				t.Errorf("key %x: the existing one = %v, want %v", key, old, tc.wantOld)
			}
			if len(key) < MinKeyLen {
				t.Errorf("key of %d bytes, want at least %d", len(key), MinKeyLen)
			}
		})
	}
}

// TestMakeKeyMakesADifferentKeyEachTime: two fresh clusters never share a key.
func TestMakeKeyMakesADifferentKeyEachTime(t *testing.T) {
	keys := map[string]bool{}
	for range 2 {
		c := fake.NewClientset()
		if _, err := MakeKey(context.Background(), c, "ns", "s"); err != nil {
			t.Fatal(err)
		}
		s, err := c.CoreV1().Secrets("ns").Get(context.Background(), "s", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		keys[string(s.Data[KeyField])] = true
	}
	if len(keys) != 2 {
		t.Fatal("two clusters got the same key")
	}
}

// TestMakeKeyReportsOtherErrors: a refused create (no RBAC) is an error, not "present".
func TestMakeKeyReportsOtherErrors(t *testing.T) {
	c := fake.NewClientset()
	c.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errForbidden
	})
	if _, err := MakeKey(context.Background(), c, "ns", "s"); err == nil {
		t.Fatal("a forbidden create was taken for an existing key")
	}
	if _, err := MakeKey(context.Background(), c, "", "s"); err == nil {
		t.Fatal("no namespace was accepted")
	}
}
