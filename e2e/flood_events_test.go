//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/driverset/driverset/contract"
)

// floodEvents is the Events attack (issue 35): while S-0 is missing, driverset's leader reads the
// StatefulSet's Events, live, every missingDriverGrace, to say why; a core/v1 Event's message has
// no size limit, and a tenant may write Events about its own objects. Here the namespace's quota
// refuses S-0, and the tenant writes floodPods Events of floodPayload bytes about the StatefulSet,
// shaped as the StatefulSet controller's FailedCreate Warnings. driverset's memory at its highest,
// sampled through three such reads, grows by no more than floodAllowed, and the placeholder still
// says why S-0 is missing, in few words (an Event's note may have at most 1 KiB).
func floodEvents(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	attacker := tenant(t, ns)
	removedAtEnd(t, ns)
	// The placeholder is the namespace's one pod: S-0 would be the second.
	quota(t, ns, "pods", corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")})
	s := submit(t, app(ns, "events-flood"))
	names := contract.NamesFor(s.plan.DriverPodName)
	placeholderMessage := func(ctx context.Context) (string, error) {
		p, err := kube().CoreV1().Pods(ns).Get(ctx, s.plan.DriverPodName, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return p.Status.Message, nil
	}
	waitFor(t, 60*time.Second, "the placeholder telling why S-0 is missing", func(ctx context.Context) (bool, error) {
		msg, err := placeholderMessage(ctx)
		return strings.Contains(msg, "cannot create the driver pod"), err
	})
	sts, err := attacker.AppsV1().StatefulSets(ns).Get(ctx, names.StatefulSet, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the tenant cannot read its app's StatefulSet: %v", err)
	}

	before := settledRSS(t)
	peak := samplePeakRSS()
	start := time.Now()
	flood(t, attacker, ns, func(ctx context.Context, c kubernetes.Interface, ns string, i int) error {
		now := metav1.Now()
		_, err := c.CoreV1().Events(ns).Create(ctx, &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.flood-%03d", sts.Name, i)},
			InvolvedObject: corev1.ObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet",
				Namespace: ns, Name: sts.Name, UID: sts.UID},
			Type: corev1.EventTypeWarning, Reason: "FailedCreate", Message: pad(floodPayload),
			Source: corev1.EventSource{Component: "statefulset-controller"}, Count: 1,
			FirstTimestamp: now, LastTimestamp: now,
		}, metav1.CreateOptions{})
		return err
	})
	// Three of driverset's reads (one every 10 s while S-0 is missing).
	time.Sleep(35 * time.Second)
	highest := peak()
	msg, err := placeholderMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d Events of %d KiB about StatefulSet %s created by the tenant in %s; driverset's RSS %.1f MiB before, %.1f MiB at its highest; the placeholder's message has %d bytes",
		floodPods, floodPayload>>10, sts.Name, time.Since(start).Round(time.Second), mib(before), mib(highest), len(msg))
	if grew := highest - before; grew > floodAllowed {
		t.Errorf("driverset's RSS grew by %.1f MiB, at its highest, with the tenant's %d MiB of Events, over the %.0f MiB allowed",
			mib(grew), floodPods*floodPayload>>20, mib(floodAllowed))
	}
	if len(msg) > 1<<10 {
		t.Errorf("the placeholder's message has %d bytes (%q…): an Event's message went into it uncut", len(msg), msg[:80])
	}
	if !strings.Contains(msg, "cannot create the driver pod") {
		t.Errorf("the placeholder no longer says why S-0 is missing: %.200q", msg)
	}
}
