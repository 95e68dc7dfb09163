package main

import (
	"context"
	"net"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/driverset/driverset/e2e/sparksim"
)

// Exit codes of the driver besides the ones its conf asks for.
const (
	exitFailed  = 1   // the driver could not start (as a JVM dying on an exception)
	exitSIGTERM = 143 // 128+SIGTERM, as the JVM exits on SIGTERM
)

// driver is one run of the simulated driver JVM in pod ns/pod.
type driver struct {
	client kubernetes.Interface
	ns     string
	pod    string
	logf   func(string, ...any)
	// listen opens the driver's RPC port (net.Listen in the binary).
	listen func(network, addr string) (net.Listener, error)
	// poll is how often the control ConfigMap is read.
	poll time.Duration
	// spawnOrphan leaves a process behind, detached from the driver (see orphan.go).
	spawnOrphan func() error
	// spill writes that many MiB to the container's own disk (see ConfSpillMiB).
	spill func(mib int) error
}

// run plays the driver until its end and returns its exit code. term ending is SIGTERM.
func (r driver) run(term context.Context) int {
	d, err := sparksim.StartDriver(term, r.client, r.ns, r.pod)
	if err != nil {
		r.logf("simspark: driver failed to start: %v", err)
		return exitFailed
	}
	conf := d.Conf()
	p, err := planFor(conf)
	if err != nil {
		r.logf("simspark: %v", err)
		return exitFailed
	}
	r.logf("simspark: driver started, app %s, host %s, pod %s", d.AppID(), conf["spark.driver.host"], r.pod)
	if p.spawnOrphan {
		if err := r.spawnOrphan(); err != nil {
			r.logf("simspark: leaving an orphan behind: %v", err)
			return exitFailed
		}
	}
	if p.spillMiB > 0 {
		if err := r.spill(p.spillMiB); err != nil {
			r.logf("simspark: spilling %d MiB: %v", p.spillMiB, err)
			return exitFailed
		}
		r.logf("simspark: spilled %d MiB to local disk", p.spillMiB)
	}
	ln, err := r.listen("tcp", ":"+strconv.Itoa(p.port))
	if err != nil {
		r.logf("simspark: driver port: %v", err)
		return exitFailed
	}
	serving, stopServing := context.WithCancel(term)
	served := make(chan struct{})
	go func() {
		defer close(served)
		serveExecutors(serving, ln, r.logf, nil)
	}()
	defer func() { stopServing(); <-served }()

	if _, err := d.RequestExecutors(term, p.executors); err != nil && term.Err() == nil {
		r.logf("simspark: requesting %d executors: %v", p.executors, err)
		return exitFailed
	}
	code, ok := r.wait(term, p)
	if !ok {
		r.logf("simspark: SIGTERM, shutting down")
		return exitSIGTERM
	}
	if code == 0 {
		// Spark's clean stop; a failing driver leaves its executors to the garbage collector.
		if err := d.Stop(context.WithoutCancel(term)); err != nil {
			r.logf("simspark: stopping: %v", err)
		}
	}
	r.logf("simspark: driver ends with exit code %d", code)
	return code
}

// wait blocks until the run is over: ok is false when term ended first.
func (r driver) wait(term context.Context, p plan) (code int, ok bool) {
	var timeUp <-chan time.Time
	if p.run > 0 {
		t := time.NewTimer(p.run)
		defer t.Stop()
		timeUp = t.C
	}
	var tick <-chan time.Time
	if p.controlConfigMap != "" {
		t := time.NewTicker(r.poll)
		defer t.Stop()
		tick = t.C
	}
	var lastErr string
	for {
		select {
		case <-term.Done():
			return 0, false
		case <-timeUp:
			return p.exitCode, true
		case <-tick:
			cm, err := r.client.CoreV1().ConfigMaps(r.ns).Get(term, p.controlConfigMap, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			var (
				code int
				set  bool
			)
			if err == nil {
				code, set, err = controlExit(cm.Data)
			}
			if err != nil {
				// Logged once per distinct error: the poll runs every second.
				if msg := err.Error(); msg != lastErr && term.Err() == nil {
					r.logf("simspark: control ConfigMap %s: %v", p.controlConfigMap, err)
					lastErr = msg
				}
				continue
			}
			if set {
				return code, true
			}
		}
	}
}
