package testbed

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/prop"
)

// A real node's graceful shutdown needs systemd-logind: the kubelet's node shutdown manager
// (k8s v1.37 pkg/kubelet/nodeshutdown/systemd) dials the system bus, reads logind's
// InhibitDelayMaxUSec, takes a "delay" inhibitor lock with Inhibit, and kills its pods when
// logind signals PrepareForShutdown(true). This VM runs no logind, and the test bed must not
// shut it down anyway. So a node may get a D-Bus system bus of its own (Debian's dbus-daemon,
// its socket in the node's folder, where every node's kubelet looks: DBUS_SYSTEM_BUS_ADDRESS in
// the node script) with a fake logind on it, served from the test process, which emits
// PrepareForShutdown when a test asks. Nothing of the host's D-Bus or /etc/systemd is touched.

const (
	logindName      = "org.freedesktop.login1"
	logindPath      = dbus.ObjectPath("/org/freedesktop/login1")
	logindInterface = "org.freedesktop.login1.Manager"
)

// busConfig lets root (every node runs as root) own names, call and receive anything: the bus
// carries only the kubelet and the fake logind of one node.
const busConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={{.}}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="root"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
`

// Inhibitor is one Inhibit call the fake logind answered.
type Inhibitor struct {
	What, Who, Why, Mode string
	At                   time.Time
}

// Logind is a node's private system bus with a fake systemd-logind on it.
type Logind struct {
	sock string
	bus  *process
	conn *dbus.Conn

	mu         sync.Mutex
	inhibitors []Inhibitor
	held       []*os.File // both ends of every inhibitor pipe, closed by Close
	closed     bool
}

// StartLogind gives real node name its own system bus and a fake logind that advertises
// maxDelay as InhibitDelayMaxUSec (at least the kubelet's shutdownGracePeriod, or the kubelet
// would try to rewrite /etc/systemd/logind.conf.d and reload logind through systemd). The node's
// kubelet uses it once it runs with a shutdown grace period (RestartKubelet). Close, or the test
// bed's Stop, ends both.
func (c *Cluster) StartLogind(name string, maxDelay time.Duration) (*Logind, error) {
	n, ok := c.realNode(name)
	if !ok {
		return nil, fmt.Errorf("testbed: %s is not a real node", name)
	}
	comp := name + "-dbus"
	l, err := startLogind(c.spawn, n.files.BusSocket, c.logPath(comp), maxDelay)
	if err != nil {
		return nil, fmt.Errorf("testbed: node %s: %w", name, err)
	}
	c.mu.Lock()
	c.logged[comp] = true
	old := n.logind
	n.logind = l
	c.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	c.logf("node %s: private system bus at %s with a fake logind (InhibitDelayMaxUSec %s)", name, n.files.BusSocket, maxDelay)
	return l, nil
}

// startLogind runs dbus-daemon listening on sock, its output in logPath, and serves the fake
// logind on it.
func startLogind(spawn *spawner, sock, logPath string, maxDelay time.Duration) (*Logind, error) {
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		return nil, errors.New("a node's graceful shutdown needs dbus-daemon: run hack/node-packages.sh")
	}
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		return nil, err
	}
	_ = os.Remove(sock) // left by a bus that was killed
	conf, err := renderTemplate("bus.conf", busConfig, sock)
	if err != nil {
		return nil, err
	}
	confPath := filepath.Join(filepath.Dir(sock), "bus.conf")
	if err := os.WriteFile(confPath, conf, 0o600); err != nil {
		return nil, err
	}
	p, err := spawn.startProcess(filepath.Base(logPath), daemon, []string{"--nofork", "--nopidfile", "--nosyslog", "--config-file=" + confPath}, logPath, nil)
	if err != nil {
		return nil, err
	}
	l := &Logind{bus: p, sock: sock}
	if err := l.serve("unix:path="+sock, maxDelay); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("fake logind: %w (bus log: %s)", err, tail(logPath, 1000))
	}
	return l, nil
}

// serve connects to the bus once it listens, takes logind's name and answers the calls the
// kubelet makes.
func (l *Logind) serve(addr string, maxDelay time.Duration) error {
	var conn *dbus.Conn
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; {
		if conn, err = dbus.Connect(addr); err == nil {
			break
		}
		if l.bus.exited() || time.Now().After(deadline) {
			return fmt.Errorf("connecting to the bus: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	l.mu.Lock()
	l.conn = conn
	l.mu.Unlock()
	if err := conn.Export(logindManager{l}, logindPath, logindInterface); err != nil {
		return err
	}
	if _, err := prop.Export(conn, logindPath, prop.Map{logindInterface: {
		"InhibitDelayMaxUSec": {Value: uint64(maxDelay / time.Microsecond), Emit: prop.EmitFalse},
	}}); err != nil {
		return err
	}
	reply, err := conn.RequestName(logindName, dbus.NameFlagDoNotQueue)
	if err != nil {
		return err
	}
	if reply != dbus.RequestNameReplyPrimaryOwner {
		return fmt.Errorf("%s already owned on the bus (reply %d)", logindName, reply)
	}
	return nil
}

// logindManager is the org.freedesktop.login1.Manager interface as the kubelet uses it.
type logindManager struct{ l *Logind }

// Inhibit answers as logind does: a file descriptor whose closing releases the lock. The kubelet
// closes it once it has stopped its pods (and takes a new one when a shutdown is cancelled).
func (m logindManager) Inhibit(what, who, why, mode string) (dbus.UnixFD, *dbus.Error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, dbus.MakeFailedError(err)
	}
	m.l.mu.Lock()
	defer m.l.mu.Unlock()
	m.l.inhibitors = append(m.l.inhibitors, Inhibitor{What: what, Who: who, Why: why, Mode: mode, At: time.Now()})
	// Both ends stay open here: godbus sends the write end after this returns, and closing it
	// too early would hand the kubelet a closed descriptor.
	m.l.held = append(m.l.held, r, w)
	return dbus.UnixFD(w.Fd()), nil
}

// Inhibitors lists the Inhibit calls answered so far.
func (l *Logind) Inhibitors() []Inhibitor {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Inhibitor(nil), l.inhibitors...)
}

// PrepareForShutdown emits logind's signal: true when the machine is about to shut down (the
// kubelet stops its pods within its shutdown grace period), false when a shutdown is cancelled.
func (l *Logind) PrepareForShutdown(active bool) error {
	l.mu.Lock()
	conn := l.conn
	l.mu.Unlock()
	if conn == nil {
		return errors.New("testbed: fake logind not connected")
	}
	return conn.Emit(logindPath, logindInterface+".PrepareForShutdown", active)
}

// Close ends the fake logind and its bus. Idempotent.
func (l *Logind) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	conn, held := l.conn, l.held
	l.conn, l.held = nil, nil
	l.mu.Unlock()
	if conn != nil {
		_ = conn.Close() // the bus may be gone already; what matters is that it is gone
	}
	for _, f := range held {
		_ = f.Close()
	}
	l.bus.stop()
	if !l.bus.exited() {
		return fmt.Errorf("testbed: the bus at %s survived SIGKILL", l.sock)
	}
	return nil
}
