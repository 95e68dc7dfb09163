// Command testbed runs the e2e test bed for a human:
//
//	go run ./e2e/cmd/testbed up   [--dir D] [--nodes N] [--bin B]   # foreground until SIGINT/SIGTERM
//	go run ./e2e/cmd/testbed down [--dir D]                          # stops the `up` that owns D
//
// `up` prints `export KUBECONFIG=...` on stdout (progress goes to stderr) and writes D/state.json
// with its pid; `down` signals that pid and waits for it to exit. Logs stay in D/logs.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/driverset/driverset/e2e/testbed"
)

const (
	defaultDir = "/tmp/driverset-testbed"
	stateFile  = "state.json"
)

// state is what `up` leaves in D for `down` and for scripts.
type state struct {
	PID        int       `json:"pid"`
	Kubeconfig string    `json:"kubeconfig"`
	Server     string    `json:"server"`
	Started    time.Time `json:"started"`
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = up(os.Args[2:])
	case "down":
		err = down(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "testbed:") { // the package's errors already say where they come from
			msg = "testbed: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testbed up [--dir D] [--nodes N] [--bin B] | testbed down [--dir D]")
	os.Exit(2)
}

func up(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	dir := fs.String("dir", defaultDir, "work dir: kubeconfig, logs, certificates, etcd data, state.json")
	nodes := fs.Int("nodes", 2, "KWOK nodes to start")
	bin := fs.String("bin", os.Getenv(testbed.EnvBinDir), "folder with the binaries (hack/testbed-build.sh prints it)")
	_ = fs.Parse(args)

	if err := clearStale(*dir); err != nil {
		return err
	}
	// Claim the dir before the slow start, so that a second `up` refuses it and `down` can
	// already stop this one.
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	st := state{PID: os.Getpid(), Started: time.Now()}
	if err := writeState(*dir, st); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(*dir, stateFile))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := testbed.Start(ctx, testbed.Options{BinDir: *bin, Dir: *dir, Nodes: *nodes, Log: os.Stderr})
	if err != nil {
		return err
	}
	c.KeepLogs() // a human wants the logs after `down`
	st.Kubeconfig, st.Server = c.KubeconfigPath, c.Config.Host
	if err := writeState(*dir, st); err != nil {
		_ = c.Stop()
		return err
	}
	fmt.Printf("export KUBECONFIG=%s\n", c.KubeconfigPath)
	fmt.Fprintf(os.Stderr, "testbed: up (pid %d), nodes %v, logs in %s; stop with `testbed down --dir %s` or Ctrl-C\n",
		st.PID, c.Nodes(), filepath.Join(*dir, "logs"), *dir)

	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "testbed: stopping")
	return c.Stop()
}

// clearStale refuses a dir that a live `up` owns, removes what a finished or failed one left
// behind, and refuses any other non-empty dir (it is not ours to delete).
func clearStale(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(entries) == 0) {
		return nil
	}
	if err != nil {
		return err
	}
	st, err := readState(dir)
	switch {
	case err == nil && processAlive(st.PID):
		return fmt.Errorf("a test bed already runs in %s (pid %d); `testbed down --dir %s` first", dir, st.PID, dir)
	case err != nil && !looksLikeTestbed(dir):
		return fmt.Errorf("%s is not empty and holds no test bed; choose another --dir", dir)
	}
	fmt.Fprintf(os.Stderr, "testbed: removing what a stopped test bed left in %s\n", dir)
	return os.RemoveAll(dir)
}

// looksLikeTestbed: the layout testbed.Start writes (kept after `down` or a failed start).
func looksLikeTestbed(dir string) bool {
	for _, marker := range []string{"pki/ca.crt", "kwok-stages.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, marker)); err == nil {
			return true
		}
	}
	return false
}

func down(args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	dir := fs.String("dir", defaultDir, "the dir given to `up`")
	timeout := fs.Duration("timeout", time.Minute, "how long to wait for `up` to exit")
	_ = fs.Parse(args)

	st, err := readState(*dir)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "testbed: nothing runs in %s\n", *dir)
		return nil
	}
	if err != nil {
		return err
	}
	if !processAlive(st.PID) {
		fmt.Fprintf(os.Stderr, "testbed: pid %d already gone\n", st.PID)
		return os.Remove(filepath.Join(*dir, stateFile))
	}
	if err := syscall.Kill(st.PID, syscall.SIGTERM); err != nil {
		return fmt.Errorf("signal pid %d: %w", st.PID, err)
	}
	deadline := time.Now().Add(*timeout)
	for processAlive(st.PID) {
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d still running %v after SIGTERM", st.PID, *timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "testbed: stopped (pid %d); logs in %s\n", st.PID, filepath.Join(*dir, "logs"))
	return nil
}

func writeState(dir string, st state) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, stateFile), append(b, '\n'), 0o644)
}

func readState(dir string) (state, error) {
	var st state
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", stateFile, err)
	}
	return st, nil
}

// processAlive: signal 0 checks existence; a zombie (exited, not yet reaped) counts as gone.
func processAlive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			return i+2 >= len(b) || b[i+2] != 'Z'
		}
	}
	return true
}
