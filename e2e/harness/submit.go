package harness

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/driverset/driverset/e2e/sparksim"
)

// Submission is a spark-submit (e2e/sparksim, with waitAppCompletion) running in the background,
// as a user's would: the scenarios of e2e/ and e2e/realnode share it.
type Submission struct {
	Plan   *sparksim.Plan
	done   chan struct{}
	result *sparksim.Result
	err    error

	// alive is the cluster's liveness check (nil: none): spark-submit cannot post its driver pod,
	// nor see its app finish, without the apiserver, so the waits here fail at once, naming the
	// component, when one is down for good.
	alive Liveness
}

// Submit runs spark-submit for plan in the background until it returns or the test ends, and
// waits until the driver pod it posts exists. alive is the cluster's liveness check (the test
// bed's CheckAlive; nil: none). edit, when not nil, changes the driver pod before it is sent, as
// a pod template (spark.kubernetes.driver.podTemplateFile) would.
func Submit(t *testing.T, c kubernetes.Interface, alive Liveness, plan *sparksim.Plan, edit func(*corev1.Pod)) *Submission {
	t.Helper()
	if edit != nil {
		edit(plan.DriverPod)
	}
	s := &Submission{Plan: plan, alive: alive, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		defer close(s.done)
		s.result, s.err = sparksim.SubmitPlan(ctx, c, plan, sparksim.SubmitOptions{WaitAppCompletion: true, Log: submitLog{t}})
	}()
	if err := s.driverPodPosted(ctx, c); err != nil {
		t.Fatalf("waiting for spark-submit's driver pod %s: %v", plan.DriverPodName, err)
	}
	return s
}

// driverPodPosted waits until the driver pod of s's plan exists.
func (s *Submission) driverPodPosted(ctx context.Context, c kubernetes.Interface) error {
	return s.alive.poll(ctx, 200*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		if !s.Running() {
			return false, fmt.Errorf("spark-submit returned early: %+v, %v", s.result, s.err)
		}
		_, err := c.CoreV1().Pods(s.Plan.DriverPod.Namespace).Get(ctx, s.Plan.DriverPodName, metav1.GetOptions{})
		return err == nil, nil
	})
}

// Running reports whether spark-submit is still waiting for the app.
func (s *Submission) Running() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Result is what spark-submit returned; nil while it runs.
func (s *Submission) Result() (*sparksim.Result, error) {
	if s.Running() {
		return nil, nil
	}
	return s.result, s.err
}

// Wait waits for spark-submit to return, failing the test after timeout, when it died, or at
// once when the cluster has a component down for good (the app cannot finish without it).
func (s *Submission) Wait(t *testing.T, timeout time.Duration) *sparksim.Result {
	t.Helper()
	if err := s.returned(context.Background(), timeout); err != nil {
		t.Fatalf("waiting %s for spark-submit to return: %v", timeout, err)
	}
	if s.err != nil {
		t.Fatalf("spark-submit: %v", s.err)
	}
	return s.result
}

// returned waits up to timeout for spark-submit to return. It polls, rather than waiting on
// s.done alone, to check the cluster's liveness as it waits.
func (s *Submission) returned(ctx context.Context, timeout time.Duration) error {
	return s.alive.poll(ctx, 50*time.Millisecond, timeout, func(context.Context) (bool, error) {
		return !s.Running(), nil
	})
}

// submitLog sends spark-submit's lines to the test log.
type submitLog struct{ t *testing.T }

func (w submitLog) Write(b []byte) (int, error) {
	w.t.Log("spark-submit: " + strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
