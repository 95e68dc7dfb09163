//go:build testbed

package testbed

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// TestFakeLogindAnswersAsTheKubeletExpects plays the kubelet's node shutdown manager against the
// fake logind, call for call as k8s v1.37 pkg/kubelet/nodeshutdown/systemd makes them: the system
// bus from DBUS_SYSTEM_BUS_ADDRESS, InhibitDelayMaxUSec, a "delay" lock through Inhibit (a real
// file descriptor, which the kubelet closes to release it), and PrepareForShutdown as a signal.
func TestFakeLogindAnswersAsTheKubeletExpects(t *testing.T) {
	dir := t.TempDir()
	spawn := newSpawner()
	t.Cleanup(spawn.close)
	sock := filepath.Join(dir, "dbus", "system_bus_socket")
	l, err := startLogind(spawn, sock, filepath.Join(dir, "dbus.log"), 45*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
		if !l.bus.exited() {
			t.Error("dbus-daemon still runs after Close")
		}
	})

	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path="+sock)
	conn, err := dbus.ConnectSystemBus()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	obj := conn.Object(logindName, logindPath)

	v, err := obj.GetProperty(logindInterface + ".InhibitDelayMaxUSec")
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := v.Value().(uint64); !ok || time.Duration(d)*time.Microsecond != 45*time.Second {
		t.Errorf("InhibitDelayMaxUSec = %#v, want uint64 45 s in µs", v.Value())
	}

	call := obj.Call(logindInterface+".Inhibit", 0, "shutdown", "kubelet", "Kubelet needs time to handle node shutdown", "delay")
	if call.Err != nil {
		t.Fatal(call.Err)
	}
	var fd uint32
	if err := call.Store(&fd); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(fd), &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		t.Errorf("Inhibit gave fd %d (fstat: %v, mode %o), want a pipe received in this process", fd, err, st.Mode)
	}
	if err := syscall.Close(int(fd)); err != nil { // the kubelet's ReleaseInhibitLock
		t.Errorf("releasing the lock: %v", err)
	}
	if got := l.Inhibitors(); len(got) != 1 || got[0].Who != "kubelet" || got[0].Mode != "delay" || got[0].What != "shutdown" {
		t.Errorf("inhibitors recorded %+v, want the kubelet's delay lock on shutdown", got)
	}

	if err := conn.AddMatchSignal(dbus.WithMatchInterface(logindInterface), dbus.WithMatchMember("PrepareForShutdown"),
		dbus.WithMatchObjectPath(logindPath)); err != nil {
		t.Fatal(err)
	}
	signals := make(chan *dbus.Signal, 4)
	conn.Signal(signals)
	for _, active := range []bool{true, false} {
		if err := l.PrepareForShutdown(active); err != nil {
			t.Fatal(err)
		}
		select {
		case s := <-signals:
			if len(s.Body) != 1 || s.Body[0] != active {
				t.Errorf("signal %s %v, want PrepareForShutdown(%v)", s.Name, s.Body, active)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no PrepareForShutdown(%v) within 5 s", active)
		}
	}
}
