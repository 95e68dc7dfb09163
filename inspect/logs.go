package inspect

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// LogTarget is the pod and container whose log is the driver's: the driver container of the
// current incarnation (the placeholder never runs, so its log is empty).
func LogTarget(s *Snapshot) (pod, container string, err error) {
	if s.Driver == nil {
		msg := s.Placeholder.Status.Message
		if msg == "" {
			msg = "driverset has not made it yet"
		}
		return "", "", fmt.Errorf("driver %s/%s has no driver pod now (%s): no log to show", s.Placeholder.Namespace, s.Placeholder.Name, msg)
	}
	want := driverContainer(s.Placeholder)
	for _, c := range s.Driver.Spec.Containers {
		if c.Name == want {
			return s.Driver.Name, want, nil
		}
	}
	return "", "", fmt.Errorf("driver pod %s/%s has no container %q", s.Driver.Namespace, s.Driver.Name, want)
}

// LogOptions are the `logs` flags that reach the kubelet.
type LogOptions struct {
	Follow, Previous bool
	Tail             int64 // < 0: all
}

// StreamLogs copies the driver's log into w; with Follow, until the incarnation's container stops
// (a later incarnation is a new pod: run logs again).
func StreamLogs(ctx context.Context, c kubernetes.Interface, s *Snapshot, o LogOptions, w io.Writer) error {
	pod, container, err := LogTarget(s)
	if err != nil {
		return err
	}
	opts := &corev1.PodLogOptions{Container: container, Follow: o.Follow, Previous: o.Previous}
	if o.Tail >= 0 {
		opts.TailLines = &o.Tail
	}
	rc, err := c.CoreV1().Pods(s.Placeholder.Namespace).GetLogs(pod, opts).Stream(ctx)
	if err != nil {
		return fmt.Errorf("logs of %s/%s, container %s: %w", s.Placeholder.Namespace, pod, container, err)
	}
	defer rc.Close()
	_, err = io.Copy(w, rc)
	return err
}
