package webhook

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// ExecutorPath serves the webhook entry that selects executor pods without driverset's driver label.
const ExecutorPath = "/mutate-executor"

// Executor points the executors of a driver that driverset runs at that driver's stable name and
// ties them to the live driver pod (docs/design.md#the-executor-patch, convert.Executor). Every other pod is
// allowed unchanged. The drivers in S-0s of this version make their executors so themselves
// (convert.DriverConf), labelled, and the entry skips labelled pods: what reaches it are the
// executors of S-0s an earlier version built, which keep their template until their app ends. Its webhook entry's matchCondition sends it only executors whose controller
// is a pod named <something>-0, as every S-0 is, so other apps' executors never reach it; the
// handler still checks everything itself, as the condition is a filter on a name anyone can pick.
//
// Its webhook entry fails open (failurePolicy Ignore), and so does the handler: an executor left
// as Spark made it still reaches the driver through Spark's own Service, so nothing here ever
// refuses an executor. A lookup that fails is answered "allowed, unchanged" with a warning.
type Executor struct {
	// Reader is the informer cache that holds Spark's pods (spark-role driver and executor). It is
	// never a live client: an executor burst must not become a burst of API calls.
	Reader client.Reader
}

var _ admission.Handler = (*Executor)(nil)

// Handle implements admission.Handler. It never refuses: an error answer (a pod it cannot decode,
// say) is a refusal whatever the failurePolicy, so it becomes "allowed, unchanged" with a warning.
func (x *Executor) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp := x.handle(ctx, req)
	if resp.Allowed {
		return resp
	}
	msg := "driverset could not handle the executor pod"
	if resp.Result != nil && resp.Result.Message != "" {
		msg = resp.Result.Message
	}
	return admission.Allowed("left as Spark made it").WithWarnings("driverset: " + msg)
}

func (x *Executor) handle(ctx context.Context, req admission.Request) admission.Response {
	pod, answer := podCreate(req, "points executors at their driver")
	if answer != nil {
		return *answer
	}
	switch {
	case pod.Labels[contract.LabelSparkRole] != contract.RoleExecutor:
		return admission.Allowed("not a Spark executor pod")
	case hasLabel(pod, contract.LabelDriver):
		// Also how a re-invocation ends: the label comes with the patch.
		return admission.Allowed("already run by driverset")
	}
	driver, reason, err := x.driverOf(ctx, pod)
	if err != nil {
		return admission.Allowed(reason).WithWarnings(fmt.Sprintf("driverset: executor pod %s was not pointed at its driver: %v", podName(pod), err))
	}
	if driver == nil {
		return admission.Allowed(reason)
	}
	was := pod.DeepCopy()
	err = convert.Executor(pod, driver)
	var urlLeft *convert.DriverURLUnchanged
	switch {
	case errors.As(err, &urlLeft):
		return patched(req.Object.Raw, was, pod, fmt.Sprintf("owned by driver pod %s", driver.Name)).
			WithWarnings(urlLeft.Error())
	case err != nil:
		// Unpatched is safe (see Executor), so a pod driverset cannot tie to the driver runs as Spark made it.
		return admission.Allowed("left as Spark made it").WithWarnings("driverset: " + err.Error())
	}
	return patched(req.Object.Raw, was, pod, fmt.Sprintf("pointed at driver pod %s (%s)", driver.Name,
		contract.NamesOfStatefulSet(driver.Labels[contract.LabelDriver]).DriverHost(driver.Namespace)))
}

// driverOf finds, in the cache, the driverset driver pod (S-0) that executor e belongs to, from its
// controller ownerReference: that pod itself when it is S-0, the placeholder's S-0 when it is a
// placeholder. It returns a nil pod and the reason when e is another app's executor, and an error
// (with the reason to answer) only when the cache could not be read.
func (x *Executor) driverOf(ctx context.Context, e *corev1.Pod) (*corev1.Pod, string, error) {
	ref := metav1.GetControllerOfNoCopy(e)
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Pod" {
		return nil, "not owned by a driver pod", nil
	}
	owner, reason, err := x.get(ctx, e.Namespace, ref.Name, "its driver pod "+ref.Name)
	if owner == nil {
		return nil, reason, err
	}
	if owner.UID != ref.UID {
		// The pod of that name is a later one (a new incarnation): this executor's driver is gone,
		// and the garbage collector removes the executor with it. Tying it to the new driver would
		// make it a stale executor of that driver.
		return nil, fmt.Sprintf("its driver pod %s is gone (the pod of that name now has another UID)", ref.Name), nil
	}
	if isDriversetDriver(owner, owner.Labels[contract.LabelDriver]) {
		return owner, "", nil
	}
	if owner.Labels[contract.LabelPlaceholder] != "true" {
		return nil, fmt.Sprintf("its driver pod %s is not run by driverset", owner.Name), nil
	}
	sts, reason, err := x.statefulSetOf(ctx, owner)
	if sts == nil {
		return nil, reason, err
	}
	s0, why, err := x.get(ctx, e.Namespace, contract.NamesOfStatefulSet(sts.Name).DriverPodName(),
		fmt.Sprintf("pod %s-0, the driver of placeholder %s,", sts.Name, owner.Name))
	switch {
	case s0 == nil:
		return nil, why, err
	case !isDriversetDriver(s0, sts.Name) || !metav1.IsControlledBy(s0, sts):
		// Labelled by anyone, or an S-0 of an earlier S of that name that the garbage collector
		// has not removed yet: not this placeholder's driver.
		return nil, fmt.Sprintf("pod %s is not the driver pod of placeholder %s", s0.Name, owner.Name), nil
	}
	return s0, "", nil
}

// statefulSetOf finds, in the cache, the StatefulSet S that placeholder p controls: by its
// controller reference (p's UID), whatever its name (convert.StatefulSetOf). The names this build
// gives p (and the legacy ones) are looked up first, as a guess that holds for almost every app,
// and kept only when p controls what they name; otherwise the cache's index of StatefulSets by
// their controller decides. A nil S comes with the reason, and an error only when the cache could
// not be read.
func (x *Executor) statefulSetOf(ctx context.Context, p *corev1.Pod) (*appsv1.StatefulSet, string, error) {
	what := "the StatefulSet of placeholder " + p.Name
	for _, names := range contract.CandidateNamesFor(p.Name) {
		sts := &appsv1.StatefulSet{}
		err := x.Reader.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: names.StatefulSet}, sts)
		switch {
		case err == nil && metav1.IsControlledBy(sts, p):
			return sts, "", nil
		case err != nil && !apierrors.IsNotFound(err):
			return nil, what + " could not be looked up", fmt.Errorf("looking up StatefulSet %s/%s: %w", p.Namespace, names.StatefulSet, err)
		}
	}
	var list appsv1.StatefulSetList
	if err := x.Reader.List(ctx, &list, client.InNamespace(p.Namespace), client.MatchingFields{convert.IndexController: string(p.UID)}); err != nil {
		return nil, what + " could not be looked up", fmt.Errorf("listing the StatefulSets of placeholder %s/%s: %w", p.Namespace, p.Name, err)
	}
	sets := make([]metav1.Object, 0, len(list.Items))
	for i := range list.Items {
		sets = append(sets, &list.Items[i])
	}
	if s := convert.StatefulSetOf(p, sets); s != nil {
		return s.(*appsv1.StatefulSet), "", nil
	}
	return nil, fmt.Sprintf("placeholder %s has no StatefulSet yet", p.Name), nil
}

// get reads pod ns/name, described by what in messages, from the cache. A pod that is not there
// is a reason, not an error: the cache holds every Spark pod, so it is no driver driverset runs.
func (x *Executor) get(ctx context.Context, ns, name, what string) (*corev1.Pod, string, error) {
	if x.Reader == nil {
		return nil, "driverset has no cache to look the driver up in", errors.New("no cache reader")
	}
	p := &corev1.Pod{}
	err := x.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p)
	switch {
	case apierrors.IsNotFound(err):
		return nil, what + " is not known to driverset", nil
	case err != nil:
		return nil, what + " could not be looked up", fmt.Errorf("looking up pod %s/%s: %w", ns, name, err)
	}
	return p, "", nil
}

// isDriversetDriver: p is the driver pod of driverset's StatefulSet sts.
func isDriversetDriver(p *corev1.Pod, sts string) bool {
	return sts != "" && p.Labels[contract.LabelDriver] == sts && p.Labels[contract.LabelSparkRole] == contract.RoleDriver
}

// podName is the pod's name for messages: executors always have one, a generateName otherwise.
func podName(p *corev1.Pod) string {
	name := p.Name
	if name == "" {
		name = p.GenerateName
	}
	return p.Namespace + "/" + name
}
