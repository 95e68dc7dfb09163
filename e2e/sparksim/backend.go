package sparksim

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/driverset/driverset/contract"
)

// This file is KubernetesClusterSchedulerBackend and its ExecutorPodsAllocator as the apiserver
// sees them: the calls, in the order the audit logs of Spark 3.5.6 and 4.1.1 show
// (e2e/realnode/spark_calls_test.go compares them with real Spark's).

// ownPodReadyTimeout is how long the allocator's start waits for the driver's pod to be Ready.
const ownPodReadyTimeout = time.Second

// LabelExecInactive marks an executor the 4.x driver no longer watches.
const LabelExecInactive = "spark-exec-inactive"

// startBackend is the backend's start: (3.x+) the allocator waits for the driver's own pod to
// be Ready, then the executor watch opens (ExecutorPodsWatchSnapshotSource) and the executor
// poll starts. Both last until Stop or until ctx ends; the simulator reads nothing from them.
func (d *Driver) startBackend(ctx context.Context) error {
	if d.t.readyWait {
		d.waitOwnPodReady(ctx)
	}
	w, err := d.c.CoreV1().Pods(d.ns).Watch(ctx, metav1.ListOptions{LabelSelector: d.watchSelector()})
	if err != nil {
		return fmt.Errorf("sparksim: watching executors: %w", err)
	}
	d.execWatch = w
	go func() {
		for range w.ResultChan() { //nolint:revive // drained so that the stream never stalls
		}
	}()
	polling, stop := context.WithCancel(ctx)
	d.stopPolling = stop
	go d.poll(polling)
	return nil
}

// defaultPollInterval is spark.kubernetes.executor.apiPollingInterval's default.
const defaultPollInterval = 30 * time.Second

// poll is ExecutorPodsPollingSnapshotSource: every poll interval, the first one an interval
// after the start, a list of this app's active executors, until Stop or until ctx ends.
func (d *Driver) poll(ctx context.Context) {
	t := time.NewTicker(d.pollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = d.c.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{LabelSelector: d.activeSelector()})
		}
	}
}

// waitOwnPodReady is fabric8's waitUntilReady on the driver's pod: a list by name, and while the
// pod is not Ready a watch, for at most ownPodReadyTimeout. Spark only logs a failure.
func (d *Driver) waitOwnPodReady(ctx context.Context) {
	pods := d.c.CoreV1().Pods(d.ns)
	byName := fields.OneTermEqualSelector("metadata.name", d.ownPod.Name).String()
	l, err := pods.List(ctx, metav1.ListOptions{FieldSelector: byName})
	if err != nil || len(l.Items) == 1 && podReady(&l.Items[0]) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, ownPodReadyTimeout)
	defer cancel()
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: byName, ResourceVersion: l.ResourceVersion})
	if err != nil {
		return
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if p, isPod := ev.Object.(*corev1.Pod); !ok || isPod && podReady(p) {
				return
			}
		}
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// watchSelector is the executor watch's: this app's executors, on 4.x only the active ones.
func (d *Driver) watchSelector() string {
	if d.t.activeExecutorWatch {
		return d.activeSelector()
	}
	return d.executorSelector()
}

// activeSelector picks this app's executors not labelled spark-exec-inactive=true.
func (d *Driver) activeSelector() string {
	s := labels.SelectorFromSet(labels.Set{contract.LabelSparkAppSelector: d.appID, contract.LabelSparkRole: contract.RoleExecutor})
	r, err := labels.NewRequirement(LabelExecInactive, selection.NotEquals, []string{"true"})
	if err != nil {
		return s.String()
	}
	return s.Add(*r).String()
}

// executorSelector is how Spark finds (and deletes) its executors.
func (d *Driver) executorSelector() string {
	return labels.Set{contract.LabelSparkAppSelector: d.appID, contract.LabelSparkRole: contract.RoleExecutor}.String()
}

// RequestExecutors is one round of ExecutorPodsAllocator: it looks up reusable claims
// (getReusablePVCs, 3.4+, a failure only logged), then creates n executor pods one after
// another, numbered on from this JVM's last one. The backend's start creates the executor
// ConfigMap on its own thread while the allocator's first round runs; both audit logs show it
// after the claim lookup and before the first pod, so the simulator creates it there, once.
// It returns the pods created, and the first error.
func (d *Driver) RequestExecutors(ctx context.Context, n int) ([]*corev1.Pod, error) {
	if d.reusesClaims() {
		_, _ = d.c.CoreV1().PersistentVolumeClaims(d.ns).List(ctx, metav1.ListOptions{
			LabelSelector: labels.Set{contract.LabelSparkAppSelector: d.appID}.String()})
	}
	if err := d.ensureExecutorConfigMap(ctx); err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for range n {
		d.mu.Lock()
		d.nextID++
		id := d.nextID
		d.mu.Unlock()
		pod, err := d.executorPod(id)
		if err != nil {
			return out, err
		}
		created, err := d.c.CoreV1().Pods(d.ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return out, err
		}
		out = append(out, created)
	}
	return out, nil
}

// ensureExecutorConfigMap is KubernetesClusterSchedulerBackend.setUpExecutorConfigMap (3.1+),
// run once per driver JVM.
func (d *Driver) ensureExecutorConfigMap(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.confMap == "" || d.confMapMade {
		return nil
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      d.confMap,
			Namespace: d.ns,
			Labels: map[string]string{
				contract.LabelSparkAppSelector: d.appID,
				contract.LabelSparkRole:        contract.RoleExecutor,
			},
			OwnerReferences: []metav1.OwnerReference{ownerReference(d.ownPod)},
		},
		Immutable: ptr.To(true),
		Data:      map[string]string{"spark.kubernetes.namespace": d.ns},
	}
	if _, err := d.c.CoreV1().ConfigMaps(d.ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return err
	}
	d.confMapMade = true
	return nil
}

// Executors lists the pods Spark counts as this app's executors.
func (d *Driver) Executors(ctx context.Context) ([]corev1.Pod, error) {
	l, err := d.c.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{LabelSelector: d.executorSelector()})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// Stop is the driver's clean stop (KubernetesClusterSchedulerBackend.stop), in its order, each a
// delete of a collection by label: the Services labelled with the app id; (3.2+, while
// spark.kubernetes.driver.ownPersistentVolumeClaim holds, true by default since 3.4) the
// PersistentVolumeClaims labelled with it — the driver's own OnDemand claim included, since
// spark-submit labels it so; then the executors, then (3.x+) the executor ConfigMaps. Then the
// executor watch closes. Like Spark it carries on after a failure; the errors are joined. A JVM
// that ends through SparkContext.stop (a normal end, or an uncaught exception in the main class,
// which the shutdown hook turns into a stop) runs it; a killed JVM does not.
func (d *Driver) Stop(ctx context.Context) error {
	var errs []error
	add := func(err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	byApp := metav1.ListOptions{LabelSelector: labels.Set{contract.LabelSparkAppSelector: d.appID}.String()}
	execs := metav1.ListOptions{LabelSelector: d.executorSelector()}
	core := d.c.CoreV1()
	add(d.deleteServices(ctx, byApp))
	if d.ownsClaims() {
		add(core.PersistentVolumeClaims(d.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, byApp))
	}
	add(core.Pods(d.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, execs))
	if d.t.execConfigMap {
		add(core.ConfigMaps(d.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, execs))
	}
	if d.execWatch != nil {
		d.execWatch.Stop()
	}
	if d.stopPolling != nil {
		d.stopPolling()
	}
	return errors.Join(errs...)
}

// deleteServices deletes the Services sel selects in one call, as fabric8 does; client-go's
// typed Service client has no DeleteCollection, so it goes through the REST client. A client
// without one (client-go's fake) gets a list and a delete of each instead.
func (d *Driver) deleteServices(ctx context.Context, sel metav1.ListOptions) error {
	if rc, ok := d.c.CoreV1().RESTClient().(*rest.RESTClient); ok && rc != nil {
		return rc.Delete().Namespace(d.ns).Resource("services").
			VersionedParams(&sel, scheme.ParameterCodec).Body(&metav1.DeleteOptions{}).Do(ctx).Error()
	}
	l, err := d.c.CoreV1().Services(d.ns).List(ctx, sel)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range l.Items {
		if err := d.c.CoreV1().Services(d.ns).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ownsClaims is spark.kubernetes.driver.ownPersistentVolumeClaim (Config.KUBERNETES_DRIVER_OWN_PVC,
// 3.2+; its default became true in 3.4, and since SPARK-39965 the clean stop deletes claims only
// when it holds). 2.4 has neither the setting nor the delete.
func (d *Driver) ownsClaims() bool {
	if !d.t.ownClaims {
		return false
	}
	return d.conf["spark.kubernetes.driver.ownPersistentVolumeClaim"] != "false"
}

// reusesClaims: the allocator looks for claims to reuse before it creates executors, while
// the driver owns its claims and spark.kubernetes.driver.reusePersistentVolumeClaim holds
// (true by default since 3.4).
func (d *Driver) reusesClaims() bool {
	return d.ownsClaims() && d.conf["spark.kubernetes.driver.reusePersistentVolumeClaim"] != "false"
}
