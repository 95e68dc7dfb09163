//go:build testbed

package realnode

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/e2e/harness"
)

// driversetPanics returns every line of driverset's logs that shows a panic controller-runtime
// recovered (a run passes unless someone looks): the logs of its pods as they are at the end of
// the run, and of their containers' previous runs. A pod deleted during the run (its node lost)
// took its log with it.
func driversetPanics(ctx context.Context) ([]string, error) {
	pods, err := kube().CoreV1().Pods(driversetNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=driverset"})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			for _, previous := range []bool{false, true} {
				if previous && cs.RestartCount == 0 {
					continue
				}
				found, err := panicsInLog(ctx, p.Name, cs.Name, previous)
				if err != nil {
					return out, err
				}
				out = append(out, found...)
			}
		}
	}
	return out, nil
}

func panicsInLog(ctx context.Context, pod, container string, previous bool) ([]string, error) {
	r, err := kube().CoreV1().Pods(driversetNamespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Previous: previous}).Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("log of %s/%s (previous %v): %w", pod, container, previous, err)
	}
	defer r.Close()
	return harness.PanicsIn(r, fmt.Sprintf("%s/%s/%s (previous %v)", driversetNamespace, pod, container, previous))
}
