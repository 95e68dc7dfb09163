package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/driverset/driverset/e2e/sparksim"
	"github.com/driverset/driverset/e2e/sparksim/sparksimtest"
)

// testDriver is a simulated driver on a fake API, its pod submitted by sparksim with conf, its
// port on loopback.
type testDriver struct {
	driver
	c       *fake.Clientset
	log     *logBuffer
	plan    *sparksim.Plan
	ln      chan net.Listener
	orphans int
	spilled []int // MiB per spill
}

func newTestDriver(t *testing.T, conf map[string]string) *testDriver {
	t.Helper()
	c := sparksimtest.NewFake()
	app := sparksim.App{Version: sparksim.Spark35, Name: "pi", Namespace: "apps", ExecutorInstances: 3, Conf: conf}
	res, err := sparksim.Submit(context.Background(), c, app, sparksim.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	td := &testDriver{c: c, log: &logBuffer{}, plan: res.Plan, ln: make(chan net.Listener, 1)}
	td.driver = driver{
		client: c, ns: "apps", pod: res.Pod.Name, logf: td.log.logf, poll: 10 * time.Millisecond,
		listen: func(network, addr string) (net.Listener, error) {
			if addr != ":7078" {
				return nil, fmt.Errorf("listening on %s, want Spark's driver port", addr)
			}
			ln, err := net.Listen(network, "127.0.0.1:0")
			if err == nil {
				td.ln <- ln
			}
			return ln, err
		},
		spawnOrphan: func() error { td.orphans++; return nil },
		spill:       func(mib int) error { td.spilled = append(td.spilled, mib); return nil },
	}
	return td
}

// start runs the driver; the result comes on the returned channel.
func (td *testDriver) start(ctx context.Context) <-chan int {
	out := make(chan int, 1)
	go func() { out <- td.run(ctx) }()
	return out
}

func (td *testDriver) executors(t *testing.T) []corev1.Pod {
	t.Helper()
	l, err := td.c.CoreV1().Pods("apps").List(context.Background(), metav1.ListOptions{LabelSelector: "spark-role=executor"})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func result(t *testing.T, out <-chan int) int {
	t.Helper()
	select {
	case code := <-out:
		return code
	case <-time.After(10 * time.Second):
		t.Fatal("the driver did not end")
		return -1
	}
}

func TestDriverRegistersExecutorsAndEndsCleanlyWhenTold(t *testing.T) {
	td := newTestDriver(t, map[string]string{ConfControlConfigMap: "ctl", ConfRunSeconds: "0"})
	out := td.start(context.Background())
	ln := <-td.ln
	if line := fmt.Sprintf("simspark: driver started, app %s, host %s, pod %s", td.plan.AppID,
		td.plan.Properties["spark.driver.host"], td.pod); !td.log.has(line) {
		t.Errorf("log lacks %q:\n%s", line, td.log)
	}
	waitFor(t, "3 executor pods", func() bool { return len(td.executors(t)) == 3 })

	// An executor registers on the driver's port.
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if err := register(c, registration{ID: "1", Pod: "pi-exec-1", App: td.plan.AppID}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the registration log", func() bool {
		return td.log.has("simspark: executor 1 registered from pi-exec-1 (app " + td.plan.AppID + ")")
	})

	// No ConfigMap, then one without the key: the driver keeps running.
	time.Sleep(50 * time.Millisecond)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ctl", Namespace: "apps"}, Data: map[string]string{}}
	if _, err := td.c.CoreV1().ConfigMaps("apps").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	select {
	case code := <-out:
		t.Fatalf("ended with %d before the control key was set", code)
	default:
	}
	cm.Data[ControlExitKey] = "0"
	if _, err := td.c.CoreV1().ConfigMaps("apps").Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if code := result(t, out); code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	// The clean stop deleted the executors, and the executor's connection is gone.
	if n := len(td.executors(t)); n != 0 {
		t.Errorf("%d executors left after a clean stop", n)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("executor connection after the end: %v", err)
	}
	if td.orphans != 0 {
		t.Error("spawned an orphan unasked")
	}
}

func TestDriverFailingExitLeavesExecutors(t *testing.T) {
	td := newTestDriver(t, map[string]string{ConfControlConfigMap: "ctl", ConfRunSeconds: "0"})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ctl", Namespace: "apps"}, Data: map[string]string{"exit": "3"}}
	if _, err := td.c.CoreV1().ConfigMaps("apps").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if code := result(t, td.start(context.Background())); code != 3 {
		t.Errorf("exit %d, want 3", code)
	}
	if n := len(td.executors(t)); n != 3 {
		t.Errorf("%d executors, want the 3 a failed driver leaves", n)
	}
}

func TestDriverEndsAfterRunSecondsWithExitCode(t *testing.T) {
	td := newTestDriver(t, map[string]string{ConfRunSeconds: "1", ConfExitCode: "7", ConfSpawnOrphan: "true", ConfSpillMiB: "5"})
	start := time.Now()
	if code := result(t, td.start(context.Background())); code != 7 {
		t.Errorf("exit %d, want 7", code)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("ended after %v, before runSeconds", d)
	}
	if td.orphans != 1 {
		t.Errorf("%d orphans spawned, want 1", td.orphans)
	}
	if len(td.spilled) != 1 || td.spilled[0] != 5 {
		t.Errorf("spilled %v MiB, want one spill of 5", td.spilled)
	}
}

func TestDriverSIGTERM(t *testing.T) {
	td := newTestDriver(t, map[string]string{ConfRunSeconds: "0"})
	ctx, cancel := context.WithCancel(context.Background())
	out := td.start(ctx)
	<-td.ln
	waitFor(t, "3 executor pods", func() bool { return len(td.executors(t)) == 3 })
	cancel()
	if code := result(t, out); code != 143 {
		t.Errorf("exit %d, want 143", code)
	}
	if !td.log.has("simspark: SIGTERM, shutting down") {
		t.Errorf("log:\n%s", td.log)
	}
}

func TestDriverFailsToStart(t *testing.T) {
	for name, tc := range map[string]struct {
		pod  string
		conf map[string]string
		want string
	}{
		"no such pod":  {pod: "gone", want: "driver failed to start"},
		"bad sim conf": {conf: map[string]string{ConfExitCode: "x"}, want: ConfExitCode},
	} {
		t.Run(name, func(t *testing.T) {
			td := newTestDriver(t, tc.conf)
			if tc.pod != "" {
				td.pod = tc.pod
			}
			td.listen = func(string, string) (net.Listener, error) { return nil, errors.New("must not listen") }
			if code := result(t, td.start(context.Background())); code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if !strings.Contains(td.log.String(), tc.want) {
				t.Errorf("log lacks %q:\n%s", tc.want, td.log)
			}
		})
	}
}
