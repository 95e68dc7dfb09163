package seal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var errForbidden = apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "s", errors.New("no")) //nolint:gochecknoglobals // one refusal for the tests

// TestKeyFile is the reader's spec, step by step as the kubelet brings a Secret volume: no file
// (the Secret not made yet, or not synced yet) is not ready; a key that appears is loaded; a
// changed key replaces it; a file that goes or turns short keeps the last good key.
func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hmac-key")
	k := NewKeyFile(path)
	keyA, keyB := strings.Repeat("a", MinKeyLen), strings.Repeat("b", MinKeyLen+8)
	for _, step := range []struct {
		name        string
		write       func()
		wantChanged bool
		wantErr     bool
		wantKey     string // "" : none loaded
	}{
		{"no file: not ready", func() {}, false, true, ""},
		{"a key too short: not ready", func() { write(t, path, "short") }, false, true, ""},
		{"the key appears: ready", func() { write(t, path, keyA) }, true, false, keyA},
		{"read again, unchanged", func() {}, false, false, keyA},
		{"a new key (a rotation): replaces it", func() { write(t, path, keyB) }, true, false, keyB},
		{"the file goes: the last key is kept", func() { os.Remove(path) }, false, true, keyB},
		{"a short one: the last key is kept", func() { write(t, path, "x") }, false, true, keyB},
	} {
		step.write()
		changed, err := k.Load()
		if changed != step.wantChanged || (err != nil) != step.wantErr {
			t.Fatalf("%s: Load() = %v, %v; want changed %v, an error %v", step.name, changed, err, step.wantChanged, step.wantErr)
		}
		if got := string(k.Key()); got != step.wantKey {
			t.Fatalf("%s: key %q, want %q", step.name, got, step.wantKey)
		}
		if ready := k.Ready(nil) == nil; ready != (step.wantKey != "") {
			t.Fatalf("%s: ready %v with key %q", step.name, ready, step.wantKey)
		}
	}
}

// TestSealerReadsItsKeyFile: a Sealer on a KeyFile seals with whatever key the file holds now, so
// a rotated key is used without a restart, and seals nothing before a key is there.
func TestSealerReadsItsKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hmac-key")
	k := NewKeyFile(path)
	s := Sealer{Keys: k, Now: func() time.Time { return t0 }}
	p := placeholder()
	if err := s.Sign(p, "alice"); err == nil {
		t.Fatal("sealed with no key")
	}
	write(t, path, strings.Repeat("a", MinKeyLen))
	if _, err := k.Load(); err != nil {
		t.Fatal(err)
	}
	if err := s.Sign(p, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := sealer("a").Verify(p, t0); err != nil {
		t.Fatalf("sealed with another key than the file's: %v", err)
	}
	write(t, path, strings.Repeat("b", MinKeyLen))
	if _, err := k.Load(); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(p, t0); err == nil {
		t.Fatal("a seal of the old key still holds after the file changed")
	}
}

// write replaces path's content as the kubelet does: a new file renamed over the old.
func write(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
