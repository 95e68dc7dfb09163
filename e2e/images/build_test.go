package images

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestJoinLdflags(t *testing.T) {
	for _, tc := range []struct {
		words []string
		want  string // "" means refused
	}{
		{[]string{"-s", "-w"}, "-s -w"},
		{[]string{"-X", "main.v=a b"}, "-X 'main.v=a b'"},
		{[]string{"-X", "main.v=it's"}, `-X "main.v=it's"`},
		{[]string{"-X", "main.v="}, "-X main.v="},
		{[]string{""}, "''"},
		{[]string{`a'b"c`}, ""},
	} {
		got, err := joinLdflags(tc.words)
		if tc.want == "" {
			if err == nil {
				t.Errorf("%q: accepted as %q", tc.words, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: got %q, %v; want %q", tc.words, got, err, tc.want)
		}
	}
}

// build compiles pkg with GoBinary into a file in a temp dir and returns its path.
func build(t *testing.T, pkg string, ldflags ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute) // a cold build cache on 2 shared cores is slow
	defer cancel()
	bin, err := GoBinary(ctx, pkg, ldflags...)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked", pkg)
		}
	}
	if f.Section(".symtab") != nil {
		t.Errorf("%s is not stripped", pkg)
	}
	path := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestGoBinaryPassesLdflags(t *testing.T) {
	bin := build(t, "./e2e/images/testdata/printvar", "-X", "main.value=set at link time")
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "set at link time" {
		t.Errorf("printed %q", got)
	}
}

func TestGoBinaryFailsOnBadPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	if _, err := GoBinary(context.Background(), "./e2e/images/no-such-package"); err == nil {
		t.Error("no error")
	}
}

func TestPauseExitsZeroOnSignal(t *testing.T) {
	bin := build(t, "./e2e/images/pause")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.Command(bin)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// It must still be blocking after a while, then end 0 on the signal.
		time.Sleep(200 * time.Millisecond)
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatalf("%v: pause already gone: %v", sig, err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("%v: %v, want exit 0", sig, err)
		}
	}
}

// TestPauseReapsOrphans runs pause as PID 1 of a new PID namespace, leaves an orphan in it and
// checks that no zombie stays behind once the orphan exits.
func TestPauseReapsOrphans(t *testing.T) {
	bin := build(t, "./e2e/images/pause")
	if os.Geteuid() != 0 {
		t.Skip("needs root for a PID namespace")
	}
	for _, tool := range []string{"unshare", "nsenter", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(tool, " not found")
		}
	}
	// unshare forks pause as PID 1 of the new namespace.
	ns := exec.Command("unshare", "--pid", "--fork", bin)
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ns.Process.Kill(); _ = ns.Wait() }()
	var pause int
	for deadline := time.Now().Add(5 * time.Second); pause == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		pause = childOf(t, ns.Process.Pid)
	}
	if pause == 0 {
		t.Fatal("pause did not start under unshare")
	}
	// sh leaves a short sleep behind (its output away from ours, or we would wait for it) and exits: the sleep is reparented to pause.
	if out, err := exec.Command("nsenter", "-t", strconv.Itoa(pause), "-p", "--", "sh", "-c", "sleep 1 >/dev/null 2>&1 & exit 0").CombinedOutput(); err != nil {
		t.Fatalf("nsenter: %v\n%s", err, out)
	}
	time.Sleep(100 * time.Millisecond)
	if c := childOf(t, pause); c == 0 {
		t.Fatal("the orphan was not reparented to pause")
	}
	deadline := time.Now().Add(5 * time.Second)
	for childOf(t, pause) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a child of pause is still there (a zombie: pause did not reap it)")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := syscall.Kill(pause, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := ns.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 0 {
			t.Errorf("unshare (pause) ended with %v", err)
		}
	}
}

// childOf is the PID of one child of pid (zombies included), 0 if it has none.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	tasks, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid …; comm may hold blanks, so split after its last ')'.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			n, _ := strconv.Atoi(strings.Fields(s)[0])
			return n
		}
	}
	return 0
}
