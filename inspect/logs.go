package inspect

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
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
	Follow, Previous, Timestamps bool
	Tail                         int64 // < 0: all
	// Container is another container of the driver pod (a sidecar); "": the driver container.
	Container string
	// Since: only the lines newer than this (0: all).
	Since time.Duration
}

// LogRequest is the pod and the log request that o asks of the driver's current incarnation.
func LogRequest(s *Snapshot, o LogOptions) (string, *corev1.PodLogOptions, error) {
	pod, container, err := LogTarget(s)
	if err != nil {
		return "", nil, err
	}
	if o.Container != "" {
		var names []string
		for _, c := range s.Driver.Spec.Containers {
			names = append(names, c.Name)
		}
		if !slices.Contains(names, o.Container) {
			return "", nil, fmt.Errorf("driver pod %s/%s has no container %q (it has %v)", s.Driver.Namespace, pod, o.Container, names)
		}
		container = o.Container
	}
	opts := &corev1.PodLogOptions{Container: container, Follow: o.Follow, Previous: o.Previous, Timestamps: o.Timestamps}
	if o.Tail >= 0 {
		opts.TailLines = &o.Tail
	}
	if o.Since > 0 {
		opts.SinceSeconds = ptr.To(int64(math.Ceil(o.Since.Seconds())))
	}
	return pod, opts, nil
}

// StreamLogs copies the driver's log into w; with Follow, until the incarnation's container stops
// (a later incarnation is a new pod: run logs again).
func StreamLogs(ctx context.Context, c kubernetes.Interface, s *Snapshot, o LogOptions, w io.Writer) error {
	pod, opts, err := LogRequest(s, o)
	if err != nil {
		return err
	}
	rc, err := c.CoreV1().Pods(s.Placeholder.Namespace).GetLogs(pod, opts).Stream(ctx)
	if err != nil {
		return fmt.Errorf("logs of %s/%s, container %s: %w", s.Placeholder.Namespace, pod, opts.Container, err)
	}
	defer rc.Close()
	_, err = io.Copy(w, rc)
	return err
}
