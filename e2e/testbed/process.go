package testbed

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// stopGrace is how long a component gets between SIGTERM and SIGKILL.
const stopGrace = 5 * time.Second

// process is one running component, in its own process group.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has been reaped
	err  error         // Wait's result, valid once done is closed
}

// spawner starts every child process from one OS thread that lives as long as the cluster.
// Pdeathsig fires when the *thread* that forked the child exits, not the process; Go may retire
// an ordinary goroutine's thread at any time, which would SIGKILL a healthy component. A locked
// thread that only exits after Stop makes Pdeathsig mean "the test process died".
type spawner struct {
	reqs chan spawnReq
	quit chan struct{}
}

type spawnReq struct {
	cmd   *exec.Cmd
	reply chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), quit: make(chan struct{})}
	started := make(chan struct{})
	go func() {
		// Never unlocked: when this goroutine returns, its thread exits with it, which SIGKILLs
		// any child still alive. close() is called only after every child was stopped.
		runtime.LockOSThread()
		close(started)
		for {
			select {
			case r := <-s.reqs:
				r.reply <- r.cmd.Start()
			case <-s.quit:
				return
			}
		}
	}()
	<-started
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	reply := make(chan error, 1)
	select {
	case s.reqs <- spawnReq{cmd: cmd, reply: reply}:
	case <-s.quit:
		return errors.New("test bed already stopped")
	}
	return <-reply
}

func (s *spawner) close() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
}

// startProcess runs bin with args, stdout and stderr appended to logPath, in a new process
// group that is SIGKILLed when the test process dies.
func (s *spawner) startProcess(name, bin string, args []string, logPath string, env []string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "==== %s %s: %s %q\n", time.Now().Format(time.RFC3339Nano), name, bin, args)
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Stdin = nil
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own group: a terminal's Ctrl-C does not reach the components directly (the test
		// process decides how they stop), and Stop can signal the whole group.
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if err := s.start(cmd); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logf, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signalAndWait sends sig to the process group, then waits up to timeout for the process to be
// reaped; it reports whether the process is gone.
func (p *process) signalAndWait(sig syscall.Signal, timeout time.Duration) bool {
	if p.exited() {
		return true
	}
	// Negative pid: the whole group, so anything a component forked goes too.
	_ = syscall.Kill(-p.pid(), sig)
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// stop asks politely, then insists. Idempotent.
func (p *process) stop() {
	if !p.signalAndWait(syscall.SIGTERM, stopGrace) {
		p.signalAndWait(syscall.SIGKILL, stopGrace)
	}
}

// kill is a crash: SIGKILL, no chance to clean up (a dead kubelet).
func (p *process) kill() {
	p.signalAndWait(syscall.SIGKILL, stopGrace)
}

// tail returns the last n bytes of a log, for error messages.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}
