package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every driverset log under the directory is read, at any depth, and each panic line is reported;
// other logs (the test bed's) and clean lines are not.
func TestRecoveredPanics(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("driverset-4443.log", `{"level":"info","msg":"Starting workers"}
{"level":"error","msg":"Observed a panic","panic":"runtime error: index out of range"}
{"level":"error","msg":"Reconciler error","error":"panic: runtime error: index out of range [recovered]"}
`)
	write("leader-failover/driverset-4444.log", "panic: assignment to entry in nil map\n")
	write("self-managed-tls/driverset-4445.log", `{"level":"info","msg":"all good"}`+"\n")
	write("testbed/kube-apiserver.log", "Observed a panic in the apiserver's own handler\n")
	got, err := RecoveredPanics(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"driverset-4443.log:2:", "driverset-4443.log:3:", "leader-failover/driverset-4444.log:1:"}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d: %q", len(got), len(want), got)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], filepath.Join(dir, w)) {
			t.Errorf("line %d = %q, want it from %s", i, got[i], w)
		}
	}
}

func TestPanicsIn(t *testing.T) {
	log := `{"level":"info","msg":"decision"}
{"level":"error","msg":"Observed a panic","panic":"runtime error: invalid memory address or nil pointer dereference"}
{"level":"info","msg":"letting the deleted driver pod go"}
`
	got, err := PanicsIn(strings.NewReader(log), "driverset-system/driverset-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "driverset-system/driverset-1:2: ") {
		t.Errorf("PanicsIn = %q, want the second line, named", got)
	}
}
