package sparksim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// FieldManager is the field manager of 4.x's server-side apply: Spark goes through the fabric8
// client, which names itself so.
const FieldManager = "fabric8"

// SubmitOptions are spark-submit's own settings.
type SubmitOptions struct {
	// WaitAppCompletion is spark.kubernetes.submission.waitAppCompletion (true in Spark; explicit here).
	WaitAppCompletion bool
	// Log receives what spark-submit logs: each pod status it sees (phase and container states).
	Log io.Writer
	// WatchResets, when set, makes each value received end the open watch as an HTTP 410 (Gone,
	// "too old resource version") from the apiserver would: a test's way to put a watch reset at
	// a chosen moment.
	WatchResets <-chan struct{}
}

// Result is what one spark-submit run did.
type Result struct {
	Plan *Plan
	// Pod is the driver pod as the apiserver returned it from the create (nil if refused).
	Pod *corev1.Pod
	// FinalPhase is the last phase seen before spark-submit stopped waiting.
	FinalPhase corev1.PodPhase
	// Deleted: the wait ended because the pod was deleted.
	Deleted bool
	// Lost: after (re-)opening its watch spark-submit did not find the pod: it went away unseen,
	// and spark-submit (3.x/4.x) now waits for a pod of that name, in practice forever.
	Lost bool
	// Phases is each distinct phase seen, in order.
	Phases []corev1.PodPhase
	// Last is the last state of the driver pod seen before spark-submit stopped waiting (nil: none).
	Last *corev1.Pod
	// ExitCode is spark-submit's: 1 when it died on an exception (pod create refused, Service or
	// ConfigMap failed), else 0 whatever the driver did.
	ExitCode int
}

// Submit runs `spark-submit --deploy-mode cluster` for app against c (docs/spark-facts.md §1):
//  1. (2.4 only) opens the watch on the driver pod's name;
//  2. POSTs the driver pod — if refused, returns the apiserver's error with ExitCode 1 and creates
//     nothing else;
//  3. creates the driver Service, the driver's claims, then the ConfigMap, each owned by the pod (create-or-replace in
//     2.4/3.x, server-side apply in 4.x); if that fails it deletes the pod and returns the error;
//  4. if o.WaitAppCompletion, watches the pod by name (fieldSelector metadata.name) until its
//     phase is Succeeded or Failed or it is deleted. 3.x/4.x re-open an expired watch (410 Gone)
//     and hand a fresh GET to the watcher, as Spark's loop does — a pod not found then is not an
//     end: spark-submit keeps waiting (Result.Lost), until ctx ends; 2.4 ends its wait when the
//     watch reports an error, as its watcher does. A watch the server simply closes is re-opened
//     from the last resourceVersion (the fabric8 client reconnects silently).
//
// The error is non-nil exactly when spark-submit would have died (ExitCode 1), or when ctx ended.
func Submit(ctx context.Context, c kubernetes.Interface, app App, o SubmitOptions) (*Result, error) {
	plan, err := app.Plan()
	if err != nil {
		return &Result{ExitCode: 1}, err
	}
	return SubmitPlan(ctx, c, plan, o)
}

// SubmitPlan is Submit for a plan made beforehand (so that a test knows every name in advance).
func SubmitPlan(ctx context.Context, c kubernetes.Interface, plan *Plan, o SubmitOptions) (*Result, error) {
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	res := &Result{ExitCode: 1, Plan: plan}
	t, _ := plan.Version.traits()
	pods := c.CoreV1().Pods(plan.DriverPod.Namespace)
	w := &podWatch{pods: pods, name: plan.DriverPodName, res: res, log: log, t: t, resets: o.WatchResets,
		app: plan.Properties["spark.app.name"], submission: plan.DriverPod.Namespace + ":" + plan.DriverPodName}

	if t.watchBeforeCreate {
		if err := w.open(ctx, ""); err != nil {
			return res, err
		}
		defer w.close()
	}
	created, err := pods.Create(ctx, plan.DriverPod, metav1.CreateOptions{})
	if err != nil {
		fmt.Fprintf(log, "Please check \"kubectl auth can-i create pod\" first. It should be yes.\n")
		return res, err
	}
	res.Pod = created

	owner := ownerReference(created)
	svc, cm := plan.Service.DeepCopy(), plan.ConfigMap.DeepCopy()
	svc.OwnerReferences = []metav1.OwnerReference{owner}
	cm.OwnerReferences = []metav1.OwnerReference{owner}
	var claims []*corev1.PersistentVolumeClaim
	for _, pvc := range plan.Claims {
		pvc = pvc.DeepCopy()
		pvc.OwnerReferences = []metav1.OwnerReference{owner}
		claims = append(claims, pvc)
	}
	if err := createOthers(ctx, c, t, svc, claims, cm); err != nil {
		if derr := pods.Delete(ctx, created.Name, metav1.DeleteOptions{}); derr != nil {
			err = errors.Join(err, fmt.Errorf("deleting driver pod after failure: %w", derr))
		}
		return res, err
	}

	if !o.WaitAppCompletion {
		fmt.Fprintf(log, "Deployed Spark application %s with application ID %s and submission ID %s:%s into Kubernetes\n",
			plan.Properties["spark.app.name"], plan.AppID, created.Namespace, created.Name)
		res.FinalPhase = created.Status.Phase
		res.ExitCode = 0
		return res, nil
	}
	if err := w.wait(ctx, created); err != nil {
		return res, err
	}
	res.ExitCode = 0
	return res, nil
}

// createOthers creates the Service, the driver's claims and then the ConfigMap, in Spark's
// resource-list order (the feature steps' resources — DriverServiceFeatureStep before
// MountVolumesFeatureStep — then Client.run's ConfigMap).
func createOthers(ctx context.Context, c kubernetes.Interface, t traits, svc *corev1.Service, claims []*corev1.PersistentVolumeClaim, cm *corev1.ConfigMap) error {
	if t.serverSideApply {
		force := metav1.PatchOptions{FieldManager: FieldManager, Force: ptr.To(true)}
		body, err := applyBody(svc)
		if err != nil {
			return err
		}
		if _, err := c.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.ApplyPatchType, body, force); err != nil {
			return err
		}
		for _, pvc := range claims {
			if body, err = applyBody(pvc); err != nil {
				return err
			}
			if _, err := c.CoreV1().PersistentVolumeClaims(pvc.Namespace).Patch(ctx, pvc.Name, types.ApplyPatchType, body, force); err != nil {
				return err
			}
		}
		if body, err = applyBody(cm); err != nil {
			return err
		}
		_, err = c.CoreV1().ConfigMaps(cm.Namespace).Patch(ctx, cm.Name, types.ApplyPatchType, body, force)
		return err
	}
	// fabric8's createOrReplace: create; on a conflict, replace what is there.
	svcs := c.CoreV1().Services(svc.Namespace)
	if _, err := svcs.Create(ctx, svc, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		old, gerr := svcs.Get(ctx, svc.Name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		svc.ResourceVersion = old.ResourceVersion
		if _, err := svcs.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	for _, pvc := range claims {
		pvcs := c.CoreV1().PersistentVolumeClaims(pvc.Namespace)
		if _, err := pvcs.Create(ctx, pvc, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			old, gerr := pvcs.Get(ctx, pvc.Name, metav1.GetOptions{})
			if gerr != nil {
				return gerr
			}
			pvc.ResourceVersion = old.ResourceVersion
			if _, err := pvcs.Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
	}
	cms := c.CoreV1().ConfigMaps(cm.Namespace)
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		old, gerr := cms.Get(ctx, cm.Name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		cm.ResourceVersion = old.ResourceVersion
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	} else if err != nil {
		return err
	}
	return nil
}

// applyBody is the apply configuration: the whole object without status and server fields.
func applyBody(obj runtime.Object) ([]byte, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	return json.Marshal(m)
}

// podWatch is LoggingPodStatusWatcherImpl plus the loop that (re-)opens its watch.
type podWatch struct {
	pods interface {
		Get(context.Context, string, metav1.GetOptions) (*corev1.Pod, error)
		Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
	}
	name   string
	res    *Result
	log    io.Writer
	t      traits
	w      watch.Interface
	resets <-chan struct{}
	// app is spark.app.name and submission the submission ID (namespace:pod), for the log.
	app, submission string
}

func (p *podWatch) open(ctx context.Context, rv string) error {
	w, err := p.pods.Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", p.name).String(),
		ResourceVersion: rv,
	})
	if err != nil {
		return err
	}
	p.w = w
	return nil
}

// reconnectInterval is fabric8's watchReconnectInterval (1 s). Its watchReconnectLimit is -1:
// a watch that ended is reconnected without limit, so an apiserver that restarts does not end
// spark-submit's wait.
const reconnectInterval = time.Second

// reopen opens the watch again after it ended, retrying every reconnectInterval until the
// apiserver answers or ctx ends.
func (p *podWatch) reopen(ctx context.Context, rv string) error {
	for {
		err := p.open(ctx, rv)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(reconnectInterval):
		}
	}
}

func (p *podWatch) close() {
	if p.w != nil {
		p.w.Stop()
		p.w = nil
	}
}

// observe records one pod state; it reports whether the application has completed.
func (p *podWatch) observe(pod *corev1.Pod) bool {
	phase := pod.Status.Phase
	if n := len(p.res.Phases); phase != "" && (n == 0 || p.res.Phases[n-1] != phase) {
		p.res.Phases = append(p.res.Phases, phase)
	}
	if phase != "" {
		p.res.FinalPhase = phase
	}
	p.res.Last = pod
	fmt.Fprintf(p.log, "State changed, new state:\n%s", formatPodState(pod))
	return phase == corev1.PodSucceeded || phase == corev1.PodFailed
}

// wait follows the driver pod until it completes or is deleted.
func (p *podWatch) wait(ctx context.Context, created *corev1.Pod) error {
	defer p.close()
	fmt.Fprintf(p.log, "Waiting for application %s with application ID %s and submission ID %s to finish...\n",
		p.app, p.res.Plan.AppID, p.submission)
	status := time.NewTicker(reportInterval)
	defer status.Stop()
	rv := created.ResourceVersion
	if p.w == nil {
		if err := p.open(ctx, rv); err != nil {
			return err
		}
		// Spark sends the pod as it is now to the watcher right after opening the watch, so a
		// change between create and watch is not missed.
		if done, err := p.refresh(ctx, &rv); done || err != nil {
			return err
		}
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-status.C:
			fmt.Fprintf(p.log, "Application status for %s (phase: %s)\n", p.res.Plan.AppID, orUnknown(string(p.res.FinalPhase)))
		case <-p.resets:
			if done, err := p.gone(ctx, &rv); done || err != nil {
				return err
			}
		case ev, ok := <-p.w.ResultChan():
			if !ok {
				// The server ended the watch (timeout, or it went away): reconnect where it stopped.
				p.close()
				if err := p.reopen(ctx, rv); err != nil {
					return err
				}
				continue
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				pod, ok := ev.Object.(*corev1.Pod)
				if !ok || pod.Name != p.name {
					continue
				}
				rv = pod.ResourceVersion
				if p.observe(pod) {
					p.finished()
					return nil
				}
			case watch.Deleted:
				if pod, ok := ev.Object.(*corev1.Pod); ok && pod.Name != p.name {
					continue
				} else if ok {
					p.observe(pod)
				}
				p.res.Deleted = true
				p.finished()
				return nil
			case watch.Error:
				status, _ := ev.Object.(*metav1.Status)
				gone := status != nil && (status.Code == http.StatusGone || status.Reason == metav1.StatusReasonExpired ||
					status.Reason == metav1.StatusReasonGone)
				if !gone {
					// Spark's watcher treats an ERROR action as the end.
					p.finished()
					return nil
				}
				if done, err := p.gone(ctx, &rv); done || err != nil {
					return err
				}
			}
		}
	}
}

// gone is what spark-submit does when its watch ends with HTTP 410: 3.x/4.x open a new watch
// and send the pod as it is now to the watcher (Client.run's loop); 2.4's watcher takes any
// close as the end of the application.
func (p *podWatch) gone(ctx context.Context, rv *string) (bool, error) {
	if !p.t.restartWatchOnGone {
		p.finished()
		return true, nil
	}
	p.close()
	if err := p.reopen(ctx, ""); err != nil {
		return false, err
	}
	return p.refresh(ctx, rv)
}

// refresh GETs the pod and hands it to the watcher, as Client.run does right after opening a
// watch (watcher.eventReceived(MODIFIED, podWithName.get())). A pod that is not found is handed
// over as null: LoggingPodStatusWatcherImpl logs the state "unknown" and keeps waiting, on a
// watch of a name that no longer exists — so spark-submit waits until a pod of that name
// appears, which for a deleted driver pod is forever.
func (p *podWatch) refresh(ctx context.Context, rv *string) (bool, error) {
	pod, err := p.pods.Get(ctx, p.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		p.res.Lost = true
		fmt.Fprintf(p.log, "State changed, new state: unknown\n")
		return false, nil
	}
	if err != nil {
		return false, err
	}
	*rv = pod.ResourceVersion
	if p.observe(pod) {
		p.finished()
		return true, nil
	}
	return false, nil
}

// reportInterval is spark.kubernetes.report.interval: how often spark-submit logs the phase.
const reportInterval = time.Second

// finished logs the end of the wait as LoggingPodStatusWatcherImpl.watchOrStop does (3.5, 4.1).
func (p *podWatch) finished() {
	if p.res.Last == nil || len(p.res.Last.Status.ContainerStatuses) == 0 {
		fmt.Fprintf(p.log, "No containers were found in the driver pod.\n")
	} else {
		fmt.Fprintf(p.log, "Container final statuses:\n\n%s", containerStates(p.res.Last))
	}
	fmt.Fprintf(p.log, "Application %s with application ID %s and submission ID %s finished\n", p.app, p.res.Plan.AppID, p.submission)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// formatPodState is Spark's KubernetesUtils.formatPodState, shortened to what tests read.
func formatPodState(pod *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\t pod name: %s\n\t namespace: %s\n\t pod uid: %s\n\t node name: %s\n\t phase: %s\n",
		pod.Name, pod.Namespace, pod.UID, orNA(pod.Spec.NodeName), orNA(string(pod.Status.Phase)))
	if len(pod.Status.ContainerStatuses) == 0 {
		b.WriteString("\t container status: N/A\n")
	}
	b.WriteString(containerStates(pod))
	return b.String()
}

// containerStates is KubernetesUtils.containersDescription, shortened as formatPodState is.
func containerStates(pod *corev1.Pod) string {
	var b strings.Builder
	for _, cs := range pod.Status.ContainerStatuses {
		fmt.Fprintf(&b, "\t container status:\n\t\t container name: %s\n\t\t container image: %s\n", cs.Name, cs.Image)
		switch s := cs.State; {
		case s.Running != nil:
			b.WriteString("\t\t container state: running\n")
		case s.Terminated != nil:
			fmt.Fprintf(&b, "\t\t container state: terminated\n\t\t exit code: %d\n\t\t termination reason: %s\n",
				s.Terminated.ExitCode, s.Terminated.Reason)
		case s.Waiting != nil:
			fmt.Fprintf(&b, "\t\t container state: waiting\n\t\t pending reason: %s\n", s.Waiting.Reason)
		default:
			b.WriteString("\t\t container state: unknown\n")
		}
	}
	return b.String()
}

func orNA(s string) string {
	if s == "" {
		return "N/A"
	}
	return s
}
