package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
	"github.com/driverset/driverset/wrap"
)

// kubeletFinalizer stands in, on the fake apiserver, for the kubelet that a graceful pod deletion
// waits for: a pod bound to a node stays Terminating until the test says its kubelet stopped it
// (stopped) or someone force-deletes it, as on a real cluster.
const kubeletFinalizer = "test.driverset.dev/kubelet"

// deletion is one Delete call that reached the fake apiserver.
type deletion struct {
	kind, name string
	uid        types.UID // of the object deleted
	force      bool      // gracePeriodSeconds 0
}

// cluster is a fake apiserver with one placeholder P, the Placeholder reconciler for it, and the
// parts of Kubernetes the tests play by hand (the StatefulSet controller, kubelets, nodes).
type cluster struct {
	t       *testing.T
	ctx     context.Context
	c       client.Client
	rec     *events.FakeRecorder
	r       *Placeholder
	now     time.Time
	p       types.NamespacedName
	names   contract.Names
	deletes []deletion
	creates []string        // "Kind/name" of every Create call that reached the fake apiserver
	created []client.Object // what each of them asked to create
	// reconciling is set while driverset's reconcilers run (reconcile): each force-delete of a
	// driver pod they make then is asked of ForceDeletion, as deletes.driverset.dev asks it, and
	// each removal of driverset's finalizer from a pod of MayRelease, as releases.driverset.dev does.
	reconciling bool
	releases    int // finalizer removals asked of MayRelease
}

// sparkDriverPod is spark-submit's Spark 3.5 driver pod as the webhook receives it (the fixture the
// convert package's golden tests use), with the extra annotations a user set.
func sparkDriverPod(t *testing.T, annotations map[string]string) *corev1.Pod {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "convert", "testdata", "spark-3.5.pod.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p corev1.Pod
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		t.Fatal(err)
	}
	for k, v := range annotations {
		metav1.SetMetaDataAnnotation(&p.ObjectMeta, k, v)
	}
	return &p
}

// newCluster persists the placeholder that the webhook makes of sparkDriverPod, as the apiserver
// stores it (a UID, Pending, PodScheduled=False/SchedulingGated), plus objs.
func newCluster(t *testing.T, annotations map[string]string, metrics *Metrics, objs ...client.Object) *cluster {
	t.Helper()
	p := sparkDriverPod(t, annotations)
	if err := convert.ToPlaceholder(p); err != nil {
		t.Fatal(err)
	}
	if err := testSeal().Sign(p, "alice"); err != nil {
		t.Fatal(err)
	}
	p.CreationTimestamp = metav1.NewTime(t0)
	p.UID = "0b7e1d52-6c1a-4f3e-9d8b-2a4c6e8f0a1b"
	p.Status = corev1.PodStatus{
		Phase:    corev1.PodPending,
		QOSClass: corev1.PodQOSBurstable,
		Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulingGated",
			Message: "Scheduling is blocked due to non-empty scheduling gates", LastTransitionTime: metav1.NewTime(t0),
		}},
	}
	h := &cluster{
		t: t, ctx: context.Background(), rec: events.NewFakeRecorder(100), now: t0,
		p: client.ObjectKeyFromObject(p), names: contract.NamesFor(p.Name),
	}
	h.c = withEventFields(fake.NewClientBuilder()).
		WithObjects(append([]client.Object{p}, objs...)...).
		WithStatusSubresource(&corev1.Pod{}).
		WithInterceptorFuncs(interceptor.Funcs{Create: h.create, Delete: h.delete, Update: h.update, Patch: h.patch}).
		Build()
	h.r = &Placeholder{
		Client:    cacheView{h.c},
		APIReader: h.c,
		Events:    h.rec,
		Convert:   convert.Options{Image: "registry.example/driverset:test"},
		Budget:    Budget{Backoff: 10 * time.Second, MaxBackoff: 5 * time.Minute},
		Metrics:   metrics,
		Seal:      testSeal(),
		Now:       func() time.Time { return h.now },
	}
	return h
}

// create gives every new object a UID and a creationTimestamp, as the apiserver does (the fake
// client does not).
func (h *cluster) create(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
	h.creates = append(h.creates, reflect.TypeOf(obj).Elem().Name()+"/"+obj.GetName())
	h.created = append(h.created, obj.DeepCopyObject().(client.Object))
	if obj.GetUID() == "" {
		obj.SetUID(uuid.NewUUID())
	}
	if ts := obj.GetCreationTimestamp(); ts.IsZero() {
		obj.SetCreationTimestamp(metav1.NewTime(h.now))
	}
	return c.Create(ctx, obj, opts...)
}

// delete enforces a UID precondition (the fake client checks only resourceVersion) and graceful pod
// deletion (see kubeletFinalizer), and records the call.
func (h *cluster) delete(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
	o := client.DeleteOptions{}
	o.ApplyOptions(opts)
	stored := obj.DeepCopyObject().(client.Object)
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), stored); err != nil {
		return err
	}
	if o.Preconditions != nil && o.Preconditions.UID != nil && *o.Preconditions.UID != stored.GetUID() {
		return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, obj.GetName(),
			fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *o.Preconditions.UID, stored.GetUID()))
	}
	force := o.GracePeriodSeconds != nil && *o.GracePeriodSeconds == 0
	if pod, ok := stored.(*corev1.Pod); ok && force && h.reconciling && pod.Labels[contract.LabelSparkRole] == contract.RoleDriver {
		// Every force-delete of a driver the controller makes must pass the webhook entry's check
		// (ForceDeletion), or driverset would be refused its own fence on a cluster.
		if ok, why, err := h.r.ForceDeletion(ctx, pod); err != nil || !ok {
			h.t.Errorf("the controller force-deleted driver pod %s, which deletes.driverset.dev refuses: %s (%v)", pod.Name, why, err)
		}
	}
	h.deletes = append(h.deletes, deletion{kind: reflect.TypeOf(obj).Elem().Name(), name: obj.GetName(), uid: stored.GetUID(), force: force})
	if pod, ok := stored.(*corev1.Pod); ok {
		switch {
		case force && controllerutil.RemoveFinalizer(pod, kubeletFinalizer):
			if err := c.Update(ctx, pod); err != nil {
				return err
			}
			if pod.DeletionTimestamp != nil {
				// Removing the last finalizer of a Terminating pod removed it; one that others keep
				// now has the forced grace of 0, as the apiserver records it.
				if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
					return client.IgnoreNotFound(err)
				}
				pod.DeletionGracePeriodSeconds = new(int64(0))
				return c.Update(ctx, pod)
			}
		case !force && pod.DeletionTimestamp == nil && pod.Spec.NodeName != "" && !isTerminal(pod.Status.Phase):
			controllerutil.AddFinalizer(pod, kubeletFinalizer)
			if err := c.Update(ctx, pod); err != nil {
				return err
			}
		}
	}
	if err := c.Delete(ctx, stored); err != nil || !force {
		return err
	}
	// A forced delete that finalizers keep: the apiserver records its grace of 0 (the fake does not).
	if pod, ok := stored.(*corev1.Pod); ok {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return client.IgnoreNotFound(err)
		}
		pod.DeletionGracePeriodSeconds = new(int64(0))
		return c.Update(ctx, pod)
	}
	return nil
}

// update and patch ask MayRelease of each removal of driverset's finalizer from a pod that the
// reconcilers make (reconciling), as releases.driverset.dev asks it: driverset's own releases
// must pass the entry, or it would be refused them on a cluster. Both see obj as it is to be (the
// controller releases with a merge patch made from the pod it changed, letGo).
func (h *cluster) update(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
	h.checkRelease(ctx, c, obj)
	return c.Update(ctx, obj, opts...)
}

func (h *cluster) patch(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	h.checkRelease(ctx, c, obj)
	return c.Patch(ctx, obj, patch, opts...)
}

// checkRelease asks MayRelease when obj, as it is to be, lacks the finalizer that its stored
// version, read with stored, has.
func (h *cluster) checkRelease(ctx context.Context, stored client.Reader, obj client.Object) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !h.reconciling || slices.Contains(pod.Finalizers, contract.FinalizerOutcome) {
		return
	}
	var was corev1.Pod
	if err := stored.Get(ctx, client.ObjectKeyFromObject(pod), &was); err != nil || !slices.Contains(was.Finalizers, contract.FinalizerOutcome) {
		return
	}
	h.releases++
	if ok, why, err := h.r.MayRelease(ctx, &was); err != nil || !ok {
		h.t.Errorf("driverset took its finalizer off pod %s, which releases.driverset.dev refuses: %s (%v)", pod.Name, why, err)
	}
}

// reconcile runs one Reconcile of P, then one of its S-0 by the Outcomes reconciler (which lets
// a deleted S-0 go once its exit is read), and fails the test on error.
func (h *cluster) reconcile() ctrl.Result {
	h.t.Helper()
	h.reconciling = true
	res, err := h.r.Reconcile(h.ctx, ctrl.Request{NamespacedName: h.p})
	h.reconciling = false
	if err != nil {
		h.t.Fatalf("Reconcile: %v", err)
	}
	h.releaseOutcome()
	return res
}

// releaseOutcome runs the Outcomes reconciler for S-0.
func (h *cluster) releaseOutcome() {
	h.t.Helper()
	o := &Outcomes{Client: cacheView{h.c}}
	h.reconciling = true
	defer func() { h.reconciling = false }()
	if _, err := o.Reconcile(h.ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: h.p.Namespace, Name: h.names.DriverPodName()}}); err != nil {
		h.t.Fatalf("Outcomes.Reconcile: %v", err)
	}
}

func (h *cluster) placeholder() *corev1.Pod {
	h.t.Helper()
	var p corev1.Pod
	if err := h.c.Get(h.ctx, h.p, &p); err != nil {
		h.t.Fatal(err)
	}
	return &p
}

func (h *cluster) statefulSet() *appsv1.StatefulSet {
	h.t.Helper()
	var s appsv1.StatefulSet
	if err := h.c.Get(h.ctx, types.NamespacedName{Namespace: h.p.Namespace, Name: h.names.StatefulSet}, &s); err != nil {
		h.t.Fatal(err)
	}
	return &s
}

// driver returns S-0, nil when it does not exist.
func (h *cluster) driver() *corev1.Pod {
	h.t.Helper()
	var d corev1.Pod
	err := h.c.Get(h.ctx, types.NamespacedName{Namespace: h.p.Namespace, Name: h.names.DriverPodName()}, &d)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return &d
}

// startIncarnation plays the StatefulSet controller (and the incarnations webhook's gates): it
// creates S-0 from S's template, controlled by S, bound to node ("" leaves it unscheduled).
func (h *cluster) startIncarnation(node string, gates ...string) *corev1.Pod {
	h.t.Helper()
	if d := h.driver(); d != nil {
		h.t.Fatalf("the StatefulSet controller does not make %s while the old pod (Terminating: %v) exists", d.Name, d.DeletionTimestamp != nil)
	}
	s := h.statefulSet()
	yes := true
	d := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: h.names.DriverPodName(), Namespace: s.Namespace,
			Labels:      s.Spec.Template.Labels,
			Annotations: s.Spec.Template.Annotations,
			Finalizers:  s.Spec.Template.Finalizers,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "StatefulSet", Name: s.Name, UID: s.UID, Controller: &yes, BlockOwnerDeletion: &yes,
			}},
		},
		Spec: *s.Spec.Template.Spec.DeepCopy(),
	}
	d.Spec.NodeName = node
	for _, g := range gates {
		d.Spec.SchedulingGates = append(d.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
	}
	if err := h.c.Create(h.ctx, d); err != nil {
		h.t.Fatal(err)
	}
	return d
}

// setDriverStatus plays S-0's kubelet.
func (h *cluster) setDriverStatus(st corev1.PodStatus) *corev1.Pod {
	h.t.Helper()
	d := h.driver()
	if d == nil {
		h.t.Fatal("no driver pod")
	}
	d.Status = st
	if err := h.c.Status().Update(h.ctx, d); err != nil {
		h.t.Fatal(err)
	}
	return d
}

// stopped plays the kubelet confirming that a Terminating pod's containers are gone.
func (h *cluster) stopped(name string) {
	h.t.Helper()
	var pod corev1.Pod
	if err := h.c.Get(h.ctx, types.NamespacedName{Namespace: h.p.Namespace, Name: name}, &pod); err != nil {
		h.t.Fatal(err)
	}
	if pod.DeletionTimestamp == nil {
		h.t.Fatalf("pod %s is not Terminating", name)
	}
	// As a v1.37 kubelet does before its final delete (status.canBeDeleted): the containers
	// stopped (the driver by the deletion's SIGTERM, unless it had ended) and the phase terminal.
	if !isTerminal(pod.Status.Phase) {
		for i := range pod.Status.ContainerStatuses {
			cs := &pod.Status.ContainerStatuses[i]
			if cs.State.Terminated == nil {
				cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: 143, Reason: "Error", FinishedAt: metav1.NewTime(h.now)}}
			}
		}
		pod.Status.Phase = corev1.PodFailed
		if err := h.c.Status().Update(h.ctx, &pod); err != nil {
			h.t.Fatal(err)
		}
	}
	controllerutil.RemoveFinalizer(&pod, kubeletFinalizer)
	if err := h.c.Update(h.ctx, &pod); err != nil {
		h.t.Fatal(err)
	}
}

// unreachableTaints are the taints the node lifecycle controller puts on a node whose kubelet
// stopped reporting: NoSchedule keeps new pods off it, NoExecute evicts the pods there.
func unreachableTaints() []corev1.Taint {
	return []corev1.Taint{
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute},
	}
}

// setNode creates or replaces node name with its Ready condition status since the given time.
func (h *cluster) setNode(name string, ready corev1.ConditionStatus, since time.Time, taints ...corev1.Taint) {
	h.t.Helper()
	n := nodeWith(ready, since, taints...)
	n.Name = name
	var old corev1.Node
	switch err := h.c.Get(h.ctx, types.NamespacedName{Name: name}, &old); {
	case apierrors.IsNotFound(err):
		if err := h.c.Create(h.ctx, n); err != nil {
			h.t.Fatal(err)
		}
		return
	case err != nil:
		h.t.Fatal(err)
	}
	n.ResourceVersion = old.ResourceVersion
	status := n.Status
	if err := h.c.Update(h.ctx, n); err != nil {
		h.t.Fatal(err)
	}
	n.Status = status
	if err := h.c.Status().Update(h.ctx, n); err != nil {
		h.t.Fatal(err)
	}
}

// expectEvents checks the events recorded since the last call, in order, as "<type> <reason>",
// and that each one's note contains the given substrings (a map from reason to substrings).
func (h *cluster) expectEvents(want []string, notes map[string][]string) {
	h.t.Helper()
	var got []string
	var all []string
	for done := false; !done; {
		select {
		case e := <-h.rec.Events:
			all = append(all, e)
			f := strings.SplitN(e, " ", 3)
			got = append(got, f[0]+" "+f[1])
			for _, s := range notes[f[1]] {
				if !strings.Contains(e, s) {
					h.t.Errorf("event %q does not contain %q", e, s)
				}
			}
		default:
			done = true
		}
	}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		h.t.Errorf("events = %v, want %v\nall: %q", got, want, all)
	}
}

// forcedDeletions are the force-deletions (grace period 0) made so far, as "Kind/name".
func (h *cluster) forcedDeletions() []string {
	var out []string
	for _, d := range h.deletes {
		if d.force {
			out = append(out, d.kind+"/"+d.name)
		}
	}
	return out
}

// Driver pod statuses, as the kubelet reports them.

func runningStatus(since time.Time) corev1.PodStatus {
	yes := true
	return corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(since.Add(-5 * time.Second))},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(since)},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(since)},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: contract.DriverContainerName, Image: "apache/spark:3.5.3", Ready: true, Started: &yes,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(since)}},
		}},
	}
}

// quickRun is how long the driver of exitedStatus ran: well inside the default restart window,
// so each such failure is counted.
const quickRun = 5 * time.Minute

// exitedStatus: wrap recorded code at finished, after a run of quickRun, and was restarted by the
// kubelet to idle.
func exitedStatus(code int, finished time.Time) corev1.PodStatus {
	st := runningStatus(finished.Add(-quickRun))
	cs := &st.ContainerStatuses[0]
	cs.RestartCount = 1
	cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(finished.Add(time.Second))}}
	cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: int32(code), Reason: "Error", Message: wrap.TerminationMessage(code, ""),
		StartedAt: metav1.NewTime(finished.Add(-quickRun)), FinishedAt: metav1.NewTime(finished),
	}}
	return st
}

func pendingStatus() corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodPending}
}

// withEventFields has the fake apiserver select Events by the fields driverset asks for: the
// object they are about, their reason and type.
func withEventFields(b *fake.ClientBuilder) *fake.ClientBuilder {
	for field, value := range map[string]func(e *corev1.Event) string{
		"involvedObject.uid": func(e *corev1.Event) string { return string(e.InvolvedObject.UID) },
		"reason":             func(e *corev1.Event) string { return e.Reason },
		"type":               func(e *corev1.Event) string { return e.Type },
	} {
		b = b.WithIndex(&corev1.Event{}, field, func(o client.Object) []string { return []string{value(o.(*corev1.Event))} })
	}
	// And the cache's index of StatefulSets by controller (namesOf), which the reconciler reads
	// through the same fake.
	return b.WithIndex(&appsv1.StatefulSet{}, indexController, controllerUID)
}

// cacheView reads as the reconciler's informer caches do: StatefulSets, Services, heartbeat Leases
// and driverset's driver and executor pods come through the caches' transforms (no pod template;
// a pod spec cut to what is read), so a reconciler that relied on what they drop, or wrote a
// cached object back whole, fails the tests. Writes go to the cluster as they are.
type cacheView struct{ client.Client }

func (v cacheView) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := v.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	return transformed(obj)
}

func (v cacheView) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := v.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if pods, ok := list.(*corev1.PodList); ok {
		for i := range pods.Items {
			if err := transformed(&pods.Items[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// transformed applies the transform of the cache obj comes from.
func transformed(obj client.Object) error {
	var err error
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		_, err = statefulSetTransform(o)
	case *corev1.Service:
		_, err = serviceTransform(o)
	case *coordinationv1.Lease:
		_, err = leaseTransform(o)
	case *corev1.Pod:
		if _, ours := o.Labels[contract.LabelDriver]; ours {
			_, err = driverPodTransform(o)
		} else if o.Labels[contract.LabelPlaceholder] == "true" {
			_, err = placeholderTransform(o)
		}
	}
	return err
}

// makeExecutor creates executor pod name of app appID on node, controlled by driver pod
// ownerName/ownerUID, as Spark and the executors webhook leave it.
func (h *cluster) makeExecutor(name, node, appID, ownerName string, ownerUID types.UID) {
	h.t.Helper()
	h.makeExecutorOf(h.names.StatefulSet, name, node, appID, ownerName, ownerUID)
}

// makeExecutorOf makes an executor labelled driverset.dev/driver=<s>, as the driver of
// StatefulSet s labels its executors (convert.DriverConf).
func (h *cluster) makeExecutorOf(s, name, node, appID, ownerName string, ownerUID types.UID) {
	h.t.Helper()
	yes := true
	e := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: h.p.Namespace,
			Labels: map[string]string{contract.LabelSparkAppSelector: appID, contract.LabelSparkRole: contract.RoleExecutor,
				contract.LabelDriver: s},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: ownerName, UID: ownerUID, Controller: &yes,
			}},
		},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "spark-kubernetes-executor", Image: "apache/spark:3.5.3"}}},
	}
	if err := h.c.Create(h.ctx, e); err != nil {
		h.t.Fatal(err)
	}
}
