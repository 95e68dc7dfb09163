//go:build testbed

package realnode

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/seal"
)

// Issue 35, on real kubelets: the fresh install from install.yaml (TestMain) has the Job
// driverset-make-seal-key make the key as its own ServiceAccount; both replicas, made at the same
// moment, wait not ready (ContainerCreating: their Secret volume is not optional) until their
// kubelet has mounted the key, then become ready (TestMain already waited for that, and for a
// driver converted through the Service); driverset's token may not read the key. How long each
// replica waited for the kubelet's mount is logged.
func TestFreshInstallMakesTheSealKey(t *testing.T) {
	ctx := context.Background()
	s, err := kube().CoreV1().Secrets(driversetNamespace).Get(ctx, seal.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Data[seal.KeyField]) < seal.MinKeyLen {
		t.Fatalf("the Secret holds %d bytes of key", len(s.Data[seal.KeyField]))
	}
	var managers []string
	madeByTheJob := false
	for _, m := range s.ManagedFields {
		managers = append(managers, m.Manager+"/"+string(m.Operation))
		madeByTheJob = madeByTheJob || m.Manager == seal.FieldManager && m.Operation == metav1.ManagedFieldsOperationUpdate
	}
	if !madeByTheJob {
		t.Errorf("the Secret's writers %v: not made by %s", managers, seal.FieldManager)
	}
	// The Job is deleted a minute after it ends (ttlSecondsAfterFinished): either gone, or done.
	job, err := kube().BatchV1().Jobs(driversetNamespace).Get(ctx, "driverset-make-seal-key", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		t.Logf("the Job driverset-make-seal-key is gone (its TTL after it ended)")
	case err != nil:
		t.Fatal(err)
	case job.Status.Succeeded < 1:
		t.Errorf("the Job driverset-make-seal-key has not succeeded: %+v", job.Status)
	default:
		t.Logf("the Job driverset-make-seal-key succeeded, %s after its start", job.Status.CompletionTime.Sub(job.Status.StartTime.Time))
	}

	pods, err := kube().CoreV1().Pods(driversetNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=driverset"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("%d driverset pods, want 2", len(pods.Items))
	}
	for _, p := range pods.Items {
		readyAt := readySince(&p)
		if readyAt.IsZero() {
			t.Errorf("replica %s is not ready", p.Name)
			continue
		}
		if readyAt.Before(s.CreationTimestamp.Time) {
			t.Errorf("replica %s was ready at %s, before the key was made at %s", p.Name, readyAt, s.CreationTimestamp)
		}
		// The volume is not optional: the kubelet starts the container only once it has mounted
		// the key; serve then finds the file at once (it logs a wait only when it had to wait).
		var started time.Time
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "driverset" && cs.State.Running != nil {
				started = cs.State.Running.StartedAt.Time
			}
		}
		if started.Before(s.CreationTimestamp.Time) {
			t.Errorf("replica %s's container started at %s, before the key was made at %s", p.Name, started, s.CreationTimestamp)
		}
		waited, told := sealKeyWait(ctx, t, p.Name)
		t.Logf("replica %s: pod made %s, the key made %s, container started %s (%s after the key), serve waited %s for the file (told it waits: %v), ready %s after the pod was made",
			p.Name, p.CreationTimestamp.Format(time.TimeOnly), s.CreationTimestamp.Format(time.TimeOnly), started.Format(time.TimeOnly),
			started.Sub(s.CreationTimestamp.Time), waited, told, readyAt.Sub(p.CreationTimestamp.Time))
	}

	review, err := kube().AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + driversetNamespace + ":driverset",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + driversetNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: "get", Resource: "secrets", Namespace: driversetNamespace, Name: seal.SecretName,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if review.Status.Allowed {
		t.Errorf("driverset's token may get the seal key: %s", review.Status.Reason)
	}
}

// readySince is when p last became Ready, or zero when it is not.
func readySince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// sealKeyWait is how long replica pod waited for its key file, from its log (serve's
// waitForSealKey logs "seal key read" with how long it waited, only when it had to wait), and
// whether it logged that it waits.
func sealKeyWait(ctx context.Context, t *testing.T, pod string) (time.Duration, bool) {
	t.Helper()
	r, err := kube().CoreV1().Pods(driversetNamespace).GetLogs(pod, &corev1.PodLogOptions{Container: "driverset"}).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var waited time.Duration
	told := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Logger, Msg, Waited string
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Logger != "seal-key" {
			continue
		}
		switch line.Msg {
		case "not ready until the key is there":
			told = true
		case "seal key read":
			if waited, err = time.ParseDuration(line.Waited); err != nil {
				t.Errorf("%s: waited %q: %v", pod, line.Waited, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return waited, told
}

// Issue 35, rotation on real kubelets, as docs/install.md tells it: the operator deletes the
// Secret and applies the install again, whose Job (gone by its TTL) makes the next key; each
// replica reads it from its volume without a restart, and an app submitted then is sealed with the
// new key and runs. How long the kubelets took to bring the new key is logged.
func TestRotatedSealKeyReachesTheReplicas(t *testing.T) {
	ctx := context.Background()
	secrets := kube().CoreV1().Secrets(driversetNamespace)
	old, err := secrets.Get(ctx, seal.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := kube().CoreV1().Pods(driversetNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=driverset"})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("driverset pods: %d, %v; want 2", len(pods.Items), err)
	}
	// The install's Job ends in seconds and is gone a minute later: wait for that, as an operator
	// applying again would have to.
	waitFor(t, 3*time.Minute, "the install's key-maker Job gone by its TTL", func(ctx context.Context) (bool, error) {
		_, err := kube().BatchV1().Jobs(driversetNamespace).Get(ctx, "driverset-make-seal-key", metav1.GetOptions{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err := secrets.Delete(ctx, seal.SecretName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := applyInstall(ctx); err != nil {
		t.Fatal(err)
	}
	var next *corev1.Secret
	waitFor(t, 2*time.Minute, "the Job's next key", func(ctx context.Context) (bool, error) {
		s, err := secrets.Get(ctx, seal.SecretName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		next = s
		return err == nil, err
	})
	if string(next.Data[seal.KeyField]) == string(old.Data[seal.KeyField]) || next.UID == old.UID {
		t.Fatal("the rotation made the same key")
	}
	made := time.Now()
	for _, p := range pods.Items {
		waitFor(t, 3*time.Minute, "replica "+p.Name+" reading the new key", func(ctx context.Context) (bool, error) {
			return countLogLines(ctx, t, p.Name, "a new seal key read") > 0, nil
		})
		t.Logf("replica %s read the new key %s after the Job made it (restarts: none expected)", p.Name, time.Since(made).Round(time.Second))
	}
	after, err := kube().CoreV1().Pods(driversetNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=driverset"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range after.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount != 0 {
				t.Errorf("replica %s restarted %d times", p.Name, cs.RestartCount)
			}
		}
	}

	ns := namespace(t, nil)
	s := submit(t, simApp(ns, "rotated", 0), nil)
	ph, err := kube().CoreV1().Pods(ns).Get(ctx, s.plan.DriverPodName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := (seal.Sealer{Key: next.Data[seal.KeyField]}).Verify(ph, ph.CreationTimestamp.Time); err != nil {
		t.Errorf("the placeholder admitted after the rotation is not sealed with the new key: %v", err)
	}
	runningDriver(t, s, "", 3*time.Minute)
	s.end(t, "0")
}

// countLogLines counts the lines of driverset replica pod's log that hold substr.
func countLogLines(ctx context.Context, t *testing.T, pod, substr string) int {
	t.Helper()
	r, err := kube().CoreV1().Pods(driversetNamespace).GetLogs(pod, &corev1.PodLogOptions{Container: "driverset"}).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), substr) {
			n++
		}
	}
	return n
}
