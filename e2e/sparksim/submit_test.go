package sparksim

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestSubmitCreatesOwnedServiceAndConfigMap(t *testing.T) {
	tests := []struct {
		v     Version
		verbs []string
	}{
		{Spark24, []string{"watch pods", "create pods", "create services", "create configmaps"}},
		{Spark35, []string{"create pods", "patch services", "patch configmaps"}},
		{Spark41, []string{"create pods", "patch services", "patch configmaps"}},
	}
	for _, tc := range tests {
		t.Run(string(tc.v), func(t *testing.T) {
			c := newFake(t)
			res, err := Submit(context.Background(), c, testApp(tc.v), SubmitOptions{})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("Submit: %v, exit %d", err, res.ExitCode)
			}
			if got := verbs(c); !slices.Equal(got, tc.verbs) {
				t.Errorf("calls %v, want %v", got, tc.verbs)
			}
			if tc.v != Spark24 {
				for _, a := range c.Actions()[1:] {
					p := a.(k8stesting.PatchAction)
					if p.GetPatchType() != types.ApplyPatchType {
						t.Errorf("%s %s is not server-side apply: %s", tc.v, a.GetResource().Resource, p.GetPatchType())
					}
				}
			}
			want := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: res.Pod.Name, UID: "uid-" + types.UID(res.Pod.Name)}
			ctx := context.Background()
			svc, err := c.CoreV1().Services("apps").Get(ctx, res.Plan.ServiceName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cm, err := c.CoreV1().ConfigMaps("apps").Get(ctx, res.Plan.ConfigMapName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for what, refs := range map[string][]metav1.OwnerReference{"service": svc.OwnerReferences, "configmap": cm.OwnerReferences} {
				if len(refs) != 1 || refs[0].Controller == nil || !*refs[0].Controller || refs[0].BlockOwnerDeletion != nil ||
					refs[0].APIVersion != want.APIVersion || refs[0].Kind != want.Kind || refs[0].Name != want.Name || refs[0].UID != want.UID {
					t.Errorf("%s owner references %+v, want exactly %+v with controller true", what, refs, want)
				}
			}
		})
	}
}

func TestSubmitRefusedPodCreatesNothingElse(t *testing.T) {
	for _, v := range []Version{Spark24, Spark35, Spark41} {
		t.Run(string(v), func(t *testing.T) {
			c := newFake(t)
			denial := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "x",
				errors.New(`admission webhook "drivers.driverset.dev" denied the request: no`))
			c.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, denial
			})
			res, err := Submit(context.Background(), c, testApp(v), SubmitOptions{WaitAppCompletion: true})
			if !errors.Is(err, denial) && (err == nil || err.Error() != denial.Error()) {
				t.Errorf("error %v, want the apiserver's %v", err, denial)
			}
			if res.ExitCode != 1 || res.Pod != nil {
				t.Errorf("exit %d pod %v, want 1 and none", res.ExitCode, res.Pod)
			}
			for _, a := range verbs(c) {
				if strings.HasSuffix(a, "services") || strings.HasSuffix(a, "configmaps") {
					t.Errorf("after a refused pod spark-submit still called %q", a)
				}
			}
		})
	}
}

func TestSubmitDeletesThePodWhenItsObjectsFail(t *testing.T) {
	c := newFake(t)
	c.PrependReactor("patch", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewBadRequest("no configmaps today")
	})
	res, err := Submit(context.Background(), c, testApp(Spark35), SubmitOptions{WaitAppCompletion: true})
	if err == nil || res.ExitCode != 1 {
		t.Fatalf("err %v exit %d", err, res.ExitCode)
	}
	if _, err := c.CoreV1().Pods("apps").Get(context.Background(), res.Plan.DriverPodName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("driver pod still there: %v", err)
	}
}

// watchOpened makes the fake signal on ch each time a pod watch is opened.
func watchOpened(c *fake.Clientset) <-chan struct{} {
	ch := make(chan struct{}, 10)
	c.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		ch <- struct{}{}
		return false, nil, nil
	})
	return ch
}

func setPhase(t *testing.T, c *fake.Clientset, name string, phase corev1.PodPhase, exit int32) {
	t.Helper()
	ctx := context.Background()
	pod, err := c.CoreV1().Pods("apps").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = phase
	state := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
		state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Reason: "Completed"}}
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "spark-kubernetes-driver", State: state}}
	if _, err := c.CoreV1().Pods("apps").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestSubmitWaitsForTheEnd(t *testing.T) {
	tests := []struct {
		name    string
		v       Version
		end     func(t *testing.T, c *fake.Clientset, pod string)
		phases  []corev1.PodPhase
		final   corev1.PodPhase
		deleted bool
	}{
		{"succeeded", Spark35, func(t *testing.T, c *fake.Clientset, pod string) { setPhase(t, c, pod, corev1.PodSucceeded, 0) },
			[]corev1.PodPhase{corev1.PodRunning, corev1.PodSucceeded}, corev1.PodSucceeded, false},
		{"failed exits 0 too", Spark41, func(t *testing.T, c *fake.Clientset, pod string) { setPhase(t, c, pod, corev1.PodFailed, 1) },
			[]corev1.PodPhase{corev1.PodRunning, corev1.PodFailed}, corev1.PodFailed, false},
		{"deleted", Spark35, func(t *testing.T, c *fake.Clientset, pod string) {
			if err := c.CoreV1().Pods("apps").Delete(context.Background(), pod, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, []corev1.PodPhase{corev1.PodRunning}, corev1.PodRunning, true},
		{"2.4 succeeded", Spark24, func(t *testing.T, c *fake.Clientset, pod string) { setPhase(t, c, pod, corev1.PodSucceeded, 0) },
			[]corev1.PodPhase{corev1.PodRunning, corev1.PodSucceeded}, corev1.PodSucceeded, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newFake(t)
			opened := watchOpened(c)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			app := testApp(tc.v)
			plan, err := testApp(tc.v).Plan() // same seed: the names Submit will use
			if err != nil {
				t.Fatal(err)
			}
			var log bytes.Buffer
			done := make(chan struct{})
			var res *Result
			go func() {
				defer close(done)
				res, err = Submit(ctx, c, app, SubmitOptions{WaitAppCompletion: true, Log: &log})
			}()
			select {
			case <-opened:
			case <-ctx.Done():
				t.Fatal("no watch opened")
			}
			// The watch is open; wait for the pod (2.4 watches before it creates).
			for {
				if _, gerr := c.CoreV1().Pods("apps").Get(ctx, plan.DriverPodName, metav1.GetOptions{}); gerr == nil {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			setPhase(t, c, plan.DriverPodName, corev1.PodRunning, 0)
			select {
			case <-done:
				t.Fatalf("Submit returned while the driver runs: %+v %v", res, err)
			case <-time.After(100 * time.Millisecond):
			}
			tc.end(t, c, plan.DriverPodName)
			<-done
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("Submit: %v exit %d", err, res.ExitCode)
			}
			if !slices.Equal(res.Phases, tc.phases) || res.FinalPhase != tc.final || res.Deleted != tc.deleted {
				t.Errorf("phases %v final %s deleted %v, want %v %s %v", res.Phases, res.FinalPhase, res.Deleted, tc.phases, tc.final, tc.deleted)
			}
			if !strings.Contains(log.String(), "phase: Running") || !strings.Contains(log.String(), "container state: running") {
				t.Errorf("log does not show the running state:\n%s", log.String())
			}
			// LoggingPodStatusWatcherImpl's lines, as in spark-kubernetes 3.5.6 and 4.1.1.
			sid := "apps:" + plan.DriverPodName
			for _, line := range []string{
				"Waiting for application spark-pi with application ID " + plan.AppID + " and submission ID " + sid + " to finish...\n",
				"Application spark-pi with application ID " + plan.AppID + " and submission ID " + sid + " finished\n",
			} {
				if !strings.Contains(log.String(), line) {
					t.Errorf("log lacks %q:\n%s", line, log.String())
				}
			}
			if !strings.Contains(log.String(), "Container final statuses:\n\n\t container status:") {
				t.Errorf("log lacks the container final statuses:\n%s", log.String())
			}
		})
	}
}

func TestSubmitRestartsAnExpiredWatch(t *testing.T) {
	c := newFake(t)
	gone := watch.NewFake()
	first := true
	opened := make(chan struct{}, 10)
	c.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		opened <- struct{}{}
		if first {
			first = false
			return true, gone, nil
		}
		return false, nil, nil
	})
	plan, _ := testApp(Spark35).Plan()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	var res *Result
	var err error
	go func() {
		defer close(done)
		res, err = Submit(ctx, c, testApp(Spark35), SubmitOptions{WaitAppCompletion: true})
	}()
	<-opened
	gone.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired})
	<-opened // re-opened
	setPhase(t, c, plan.DriverPodName, corev1.PodSucceeded, 0)
	<-done
	if err != nil || res.FinalPhase != corev1.PodSucceeded {
		t.Errorf("after an expired watch: %v %+v", err, res)
	}
}

// A driver pod deleted while spark-submit's watch is being reset (HTTP 410) is never seen going:
// 3.x/4.x open a new watch on a name that no longer exists and wait forever
// (Client.run's loop, LoggingPodStatusWatcherImpl: a null pod is not a completion); 2.4's
// watcher ends on the close.
func TestSubmitWaitsForeverForAPodLostInAWatchReset(t *testing.T) {
	for _, tc := range []struct {
		v     Version
		hangs bool
	}{{Spark24, false}, {Spark35, true}, {Spark41, true}} {
		t.Run(string(tc.v), func(t *testing.T) {
			c := newFake(t)
			opened := watchOpened(c)
			plan, _ := testApp(tc.v).Plan()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resets := make(chan struct{})
			done := make(chan struct{})
			var res *Result
			var err error
			go func() {
				defer close(done)
				res, err = SubmitPlan(ctx, c, plan, SubmitOptions{WaitAppCompletion: true, WatchResets: resets})
			}()
			<-opened
			for {
				if _, gerr := c.CoreV1().Pods("apps").Get(ctx, plan.DriverPodName, metav1.GetOptions{}); gerr == nil {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			setPhase(t, c, plan.DriverPodName, corev1.PodRunning, 0)
			time.Sleep(50 * time.Millisecond)
			// The pod goes while no watch is open: the reset comes first, the delete before the re-watch.
			c.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
				_ = c.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "apps", plan.DriverPodName)
				return false, nil, nil
			})
			resets <- struct{}{}
			select {
			case <-done:
				if tc.hangs {
					t.Fatalf("spark-submit returned (%+v, %v); Spark %s waits forever", res, err, tc.v)
				}
			case <-time.After(500 * time.Millisecond):
				if !tc.hangs {
					t.Fatalf("spark-submit %s still waits after its watch closed", tc.v)
				}
				cancel()
				<-done
				if !res.Lost || res.Deleted {
					t.Errorf("result %+v: want Lost, not Deleted", res)
				}
			}
		})
	}
}

// The apiserver restarting closes spark-submit's watch and refuses connections for a while: the
// fabric8 client reconnects without limit (watchReconnectLimit -1, every watchReconnectInterval),
// so spark-submit keeps waiting and sees the end, rather than dying on the first refused dial.
func TestSubmitReconnectsWhileTheAPIServerIsDown(t *testing.T) {
	c := newFake(t)
	closed := watch.NewFake()
	opens := 0
	opened := make(chan struct{}, 10)
	c.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		opens++
		opened <- struct{}{}
		switch opens {
		case 1:
			return true, closed, nil
		case 2, 3:
			return true, nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
		}
		return false, nil, nil
	})
	plan, _ := testApp(Spark35).Plan()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	var res *Result
	var err error
	go func() {
		defer close(done)
		res, err = SubmitPlan(ctx, c, plan, SubmitOptions{WaitAppCompletion: true})
	}()
	<-opened
	closed.Stop() // the apiserver went away
	for range 3 { // refused twice, then open again
		select {
		case <-opened:
		case <-done:
			t.Fatalf("spark-submit died while the apiserver was down: %v (exit %d)", err, res.ExitCode)
		}
	}
	setPhase(t, c, plan.DriverPodName, corev1.PodSucceeded, 0)
	<-done
	if err != nil || res.FinalPhase != corev1.PodSucceeded || res.ExitCode != 0 {
		t.Errorf("after the apiserver came back: %v, phases %v, exit %d", err, res.Phases, res.ExitCode)
	}
}
