//go:build testbed

package realnode

import (
	"bufio"
	"context"
	"encoding/json"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/seal"
)

// Issue 35, on real kubelets: the fresh install from install.yaml (TestMain) has the Job
// driverset-make-seal-key make the key as its own ServiceAccount; both replicas, started at the
// same moment with the Secret volume optional and empty, wait not ready until their kubelet
// brings the key, then become ready (TestMain already waited for that, and for a driver
// converted through the Service); driverset's token may not read the key. How long each
// replica waited is logged: the kubelet's sync of an optional Secret volume.
func TestFreshInstallMakesTheSealKey(t *testing.T) {
	ctx := context.Background()
	s, err := kube().CoreV1().Secrets(driversetNamespace).Get(ctx, "driverset-seal", metav1.GetOptions{})
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
		waited, told := sealKeyWait(ctx, t, p.Name)
		t.Logf("replica %s: started %s, the key made %s, waited %s for the kubelet to bring it (told it waits: %v), ready %s after it started",
			p.Name, p.Status.StartTime.Format(time.TimeOnly), s.CreationTimestamp.Format(time.TimeOnly), waited, told,
			readyAt.Sub(p.Status.StartTime.Time))
	}

	review, err := kube().AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + driversetNamespace + ":driverset",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + driversetNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: "get", Resource: "secrets", Namespace: driversetNamespace, Name: "driverset-seal",
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
