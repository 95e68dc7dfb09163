package webhook

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

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

// IncarnationPath serves the webhook entry that selects driverset's own driver pods.
const IncarnationPath = "/mutate-incarnation"

// Incarnation holds a new incarnation of a driver pod (S-0, as the StatefulSet controller creates
// it) with the scheduling gate contract.GateStaleExecutors while executors of the same app still
// exist: a restarted driver JVM keeps the app id, so it would count those executors as its own
// failures, or collide with their names (2.4/3.0). The controller deletes them and lifts the gate.
//
// Its webhook entry fails closed (failurePolicy Fail), and so does the handler when the cache
// cannot be read: the StatefulSet controller retries the create, which is better than a driver
// that starts among stale executors.
type Incarnation struct {
	// Reader is the informer cache that holds Spark's pods; never a live client.
	Reader client.Reader
	// Sets is the cache of StatefulSets' metadata (controller.ExecutorSetCacheOptions), for Spark's
	// executor StatefulSets of earlier incarnations and their drivers' executor claims; never a
	// live client. Nil: none is looked at.
	Sets client.Reader
}

var _ admission.Handler = (*Incarnation)(nil)

// Handle implements admission.Handler.
func (n *Incarnation) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod, answer := podCreate(req, "holds new driver incarnations")
	if answer != nil {
		return *answer
	}
	if why := secondDriver(pod); why != "" {
		return deny(ReasonSecondDriver, why)
	}
	sts, reason := incarnationOf(pod)
	if reason != "" {
		return admission.Allowed(reason)
	}
	if n.Reader == nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("driverset has no cache to look up the executors of StatefulSet %s in", sts))
	}
	placeholder, err := n.placeholderOf(ctx, pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	// By owner, not by app id: every incarnation runs with an app id of its own
	// (wrap.IncarnationAppID), so an earlier one's executors carry another; nor by the
	// driverset.dev/driver label, which is self-declared. Every executor driverset labelled is
	// listed, whatever StatefulSet it names, and convert.ExecutorOfApp decides, as in the controller.
	var executors corev1.PodList
	if err := n.Reader.List(ctx, &executors, client.InNamespace(pod.Namespace),
		client.MatchingLabels{contract.LabelSparkRole: contract.RoleExecutor}, client.HasLabels{contract.LabelDriver}); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("driverset could not look up the executors of StatefulSet %s: %w", sts, err))
	}
	appID := pod.Labels[contract.LabelSparkAppSelector]
	driverPod := contract.NamesOfStatefulSet(sts).DriverPodName()
	left := Leftovers{Executors: executorsOfIncarnation(sts, placeholder, appID, executors.Items)}
	// Spark's executor StatefulSets of the app and its drivers' executor claims, by the rules the
	// controller waits for them by: the pod being created has no UID yet, so every one is an
	// earlier incarnation's.
	if left.Sets, err = convert.ExecutorSetsOfIncarnation(ctx, n.Sets, pod.Namespace, driverPod, ""); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("driverset could not look up the executor StatefulSets of StatefulSet %s: %w", sts, err))
	}
	if left.Claims, err = convert.ExecutorClaimsOfIncarnation(ctx, n.Sets, pod.Namespace, driverPod, ""); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("driverset could not look up the executor claims of StatefulSet %s: %w", sts, err))
	}
	was := pod.DeepCopy()
	return patched(req.Object.Raw, was, pod, HoldIncarnation(pod, left))
}

// placeholderOf is the UID of the placeholder whose StatefulSet created pod: the controller of
// the StatefulSet that pod's controller reference names, read from the cache (which holds
// driverset's StatefulSets) and taken only when its UID is the one the reference names. Empty when
// there is none: the driver pod's name alone then decides, and only an executor still under
// Spark's reference to the placeholder is missed (it is found by the controller when it deletes
// the incarnation's executors on a loss, dropExecutorsOf). An error only when the cache fails:
// the entry fails closed.
func (n *Incarnation) placeholderOf(ctx context.Context, pod *corev1.Pod) (types.UID, error) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.APIVersion != "apps/v1" || ref.Kind != "StatefulSet" {
		return "", nil
	}
	var sts appsv1.StatefulSet
	err := n.Reader.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, &sts)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("driverset could not read StatefulSet %s, whose placeholder decides which executors are the app's: %w", ref.Name, err)
	case sts.UID != ref.UID:
		return "", nil
	}
	owner := metav1.GetControllerOfNoCopy(&sts)
	if owner == nil || owner.APIVersion != "v1" || owner.Kind != "Pod" {
		return "", nil
	}
	return owner.UID, nil
}

// executorsOfIncarnation keeps, of executors, those of StatefulSet sts's app, whose placeholder
// has the UID placeholder (empty when unknown) and which was submitted as appID (S-0's
// spark-app-selector, the placeholder's): convert.ExecutorOfApp, the rule the controller
// deletes them and lifts the gate by, so that nothing is held that the controller would not wait
// for. A DStream app submitted again under another name onto an old checkpoint has executors
// labelled for the app that wrote it (Spark 3.5 Checkpoint.createSparkConf reloads the driver's
// pod name, not the executor labels) and controlled by this app's driver pod: they count.
func executorsOfIncarnation(sts string, placeholder types.UID, appID string, executors []corev1.Pod) []corev1.Pod {
	driver := contract.NamesOfStatefulSet(sts).DriverPodName()
	var out []corev1.Pod
	for i := range executors {
		if convert.ExecutorOfApp(&executors[i], driver, placeholder, appID) {
			out = append(out, executors[i])
		}
	}
	return out
}

// secondDriver says why pod must not be created: it is a pod of a driverset StatefulSet with an
// ordinal other than 0, which exists only when someone scaled the StatefulSet up by hand. It
// would be a second driver JVM of the same app; the controller scales the StatefulSet back to one.
func secondDriver(pod *corev1.Pod) string {
	index, ok := pod.Labels[appsv1.PodIndexLabel]
	if pod.Labels[contract.LabelSparkRole] != contract.RoleDriver || pod.Labels[contract.LabelDriver] == "" || !ok || index == "0" {
		return ""
	}
	return fmt.Sprintf("driverset runs one driver per app: pod %s is ordinal %s of StatefulSet %s, whose only pod is ordinal 0; "+
		"driverset scales it back to 1 replica", pod.Name, index, pod.Labels[contract.LabelDriver])
}

// incarnationOf returns the StatefulSet of pod when it is a driver pod driverset runs, else why the
// handler leaves it alone.
func incarnationOf(pod *corev1.Pod) (sts, reason string) {
	switch {
	case pod.Labels[contract.LabelSparkRole] != contract.RoleDriver:
		return "", "not a Spark driver pod"
	case pod.Labels[contract.LabelDriver] == "":
		return "", "not a driver pod run by driverset"
	}
	return pod.Labels[contract.LabelDriver], ""
}

// Leftovers are what earlier incarnations of a driver pod left that its next incarnation waits
// for: executors (executorsOfIncarnation: those of pod's StatefulSet in its namespace), Sets
// (Spark's executor StatefulSets of the app: the next driver of a DStream app makes one of the
// same name, which fails while the old one is there) and Claims (the executor claims their
// drivers made: a DStream's next driver reuses them, a Terminating one too).
type Leftovers struct {
	Executors    []corev1.Pod
	Sets, Claims []metav1.PartialObjectMetadata
}

func (l Leftovers) none() bool { return len(l.Executors)+len(l.Sets)+len(l.Claims) == 0 }

// HoldIncarnation is the decision, pure: it adds the gate contract.GateStaleExecutors to driver pod
// pod, once, when anything is left (Leftovers), and says what it decided. The pod being created
// has no UID yet, so everything left belongs to an earlier incarnation; terminating and finished
// executors count too, since the new driver would still see them. The gate is never removed
// here: lifting it is the controller's, once they are gone.
func HoldIncarnation(pod *corev1.Pod, left Leftovers) string {
	if left.none() {
		if convert.HasGate(&pod.Spec, contract.GateStaleExecutors) {
			return "already held until the stale executors are gone"
		}
		return "no executors of an earlier incarnation"
	}
	if pod.Spec.NodeName != "" {
		// The apiserver refuses a gate on a pod that is already bound; refusing the pod instead
		// would keep the driver down for good.
		return fmt.Sprintf("bound to node %s, so it cannot be held although %s", pod.Spec.NodeName, left.summary())
	}
	convert.AddGate(&pod.Spec, contract.GateStaleExecutors)
	return fmt.Sprintf("held by scheduling gate %s: %s", contract.GateStaleExecutors, left.summary())
}

// summary names a few of each kind left, sorted, so the message is the same on every call.
func (l Leftovers) summary() string {
	var parts []string
	add := func(n int, what, names string) {
		switch {
		case n == 0:
		case len(parts) == 0:
			parts = append(parts, fmt.Sprintf("%d %s of an earlier incarnation still exist (%s)", n, what, names))
		default:
			parts = append(parts, fmt.Sprintf("%d %s (%s)", n, what, names))
		}
	}
	add(len(l.Executors), "executor pod(s)", namesOf(l.Executors))
	add(len(l.Sets), "executor StatefulSet(s)", namesOf(l.Sets))
	add(len(l.Claims), "executor claim(s)", namesOf(l.Claims))
	return strings.Join(parts, ", and ")
}

// namesOf names a few of objs, sorted.
func namesOf[T any, P interface {
	*T
	GetName() string
}](objs []T) string {
	names := make([]string, 0, len(objs))
	for i := range objs {
		names = append(names, P(&objs[i]).GetName())
	}
	sort.Strings(names)
	const shown = 3
	more := ""
	if len(names) > shown {
		more = fmt.Sprintf(" and %d more", len(names)-shown)
		names = names[:shown]
	}
	return strings.Join(names, ", ") + more
}
