//go:build testbed

package realnode

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/driverset/driverset/contract"
)

// podHistory logs every change of ns's pods that a decision on a driver's end reads (phase,
// reason, deletion, finalizers, the driver container's states, the placeholder's restart and loss
// annotations), in the apiserver's order, when the test fails (or DRIVERSET_E2E_HISTORY is set): a race between the kubelet, the
// StatefulSet controller and driverset shows only there.
func podHistory(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var lines []string
	last := map[string]string{}
	start := time.Now()
	note := func(typ watch.EventType, p *corev1.Pod) {
		line := podLine(p)
		mu.Lock()
		defer mu.Unlock()
		if last[string(p.UID)] == line && typ != watch.Deleted {
			return
		}
		last[string(p.UID)] = line
		lines = append(lines, fmt.Sprintf("%6.2fs %-8s %s", time.Since(start).Seconds(), typ, line))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rv := ""
		for ctx.Err() == nil {
			w, err := kube().CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				if p, ok := ev.Object.(*corev1.Pod); ok {
					rv = p.ResourceVersion
					note(ev.Type, p)
				}
			}
			w.Stop()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if !t.Failed() && os.Getenv("DRIVERSET_E2E_HISTORY") == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		t.Logf("pods of %s as the watch saw them:\n%s", ns, strings.Join(lines, "\n"))
	})
}

// podLine is what podHistory shows of p.
func podLine(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s uid=%.8s %s", p.Name, p.UID, p.Status.Phase)
	if p.Status.Reason != "" {
		fmt.Fprintf(&b, "/%s", p.Status.Reason)
	}
	if p.DeletionTimestamp != nil {
		fmt.Fprintf(&b, " deleting(%s)", p.DeletionTimestamp.Format("15:04:05"))
	}
	if len(p.Finalizers) > 0 {
		fmt.Fprintf(&b, " fin=%d", len(p.Finalizers))
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			fmt.Fprintf(&b, " disruption=%s/%s", c.Status, c.Reason)
		}
	}
	for _, k := range []string{contract.AnnotationRestarts, contract.AnnotationRestartedIncarnation, contract.AnnotationDriverLost} {
		if v, ok := p.Annotations[k]; ok {
			fmt.Fprintf(&b, " %s=%.40s", strings.TrimPrefix(k, "driverset.dev/"), v)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		fmt.Fprintf(&b, " [%s now=%s last=%s n=%d]", cs.Name, stateLine(cs.State), stateLine(cs.LastTerminationState), cs.RestartCount)
	}
	return b.String()
}

func stateLine(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Waiting != nil:
		return "waiting/" + s.Waiting.Reason
	case s.Terminated != nil:
		return fmt.Sprintf("term(%d %s %q)", s.Terminated.ExitCode, s.Terminated.Reason, strings.ReplaceAll(s.Terminated.Message, "\n", "|"))
	}
	return "-"
}
