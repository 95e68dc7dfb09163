package webhook

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// By StatefulSet, not by app id: every incarnation runs with an app id of its own
	// (wrap.IncarnationAppID), so an earlier one's executors carry another. Every executor
	// driverset labelled is listed, whatever StatefulSet it names: executorsOfIncarnation decides.
	var executors corev1.PodList
	if err := n.Reader.List(ctx, &executors, client.InNamespace(pod.Namespace),
		client.MatchingLabels{contract.LabelSparkRole: contract.RoleExecutor}, client.HasLabels{contract.LabelDriver}); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("driverset could not look up the executors of StatefulSet %s: %w", sts, err))
	}
	was := pod.DeepCopy()
	return patched(req.Object.Raw, was, pod, HoldIncarnation(pod, executorsOfIncarnation(sts, executors.Items)))
}

// executorsOfIncarnation keeps, of executors, those of StatefulSet sts's app: labelled
// driverset.dev/driver=<sts> (as its drivers label them at birth), or controlled by a pod of the
// name of sts's driver pod, an earlier incarnation. The second is for a DStream app submitted
// again under another name onto an old checkpoint: Spark restores its SparkConf from the
// checkpoint but for a reload list that has the driver's pod name and not the executor labels, so
// its executors are labelled for the app that wrote the checkpoint (Spark 3.5
// Checkpoint.createSparkConf).
func executorsOfIncarnation(sts string, executors []corev1.Pod) []corev1.Pod {
	driver := contract.NamesOfStatefulSet(sts).DriverPodName()
	var out []corev1.Pod
	for i := range executors {
		e := &executors[i]
		ref := metav1.GetControllerOf(e)
		if e.Labels[contract.LabelDriver] == sts || ref != nil && ref.APIVersion == "v1" && ref.Kind == "Pod" && ref.Name == driver {
			out = append(out, *e)
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

// HoldIncarnation is the decision, pure: it adds the gate contract.GateStaleExecutors to driver pod
// pod, once, when executors (executorsOfIncarnation: those of pod's StatefulSet in its namespace) is
// not empty, and says what it decided. The pod being created has no UID yet, so
// every executor that exists belongs to an earlier incarnation; terminating and finished ones
// count too, since the new driver would still see them. The gate is never removed here: lifting
// it is the controller's, once the executors are gone.
func HoldIncarnation(pod *corev1.Pod, executors []corev1.Pod) string {
	if len(executors) == 0 {
		if convert.HasGate(&pod.Spec, contract.GateStaleExecutors) {
			return "already held until the stale executors are gone"
		}
		return "no executors of an earlier incarnation"
	}
	if pod.Spec.NodeName != "" {
		// The apiserver refuses a gate on a pod that is already bound; refusing the pod instead
		// would keep the driver down for good.
		return fmt.Sprintf("bound to node %s, so it cannot be held although %s", pod.Spec.NodeName, staleSummary(executors))
	}
	convert.AddGate(&pod.Spec, contract.GateStaleExecutors)
	return fmt.Sprintf("held by scheduling gate %s: %s", contract.GateStaleExecutors, staleSummary(executors))
}

// staleSummary names a few of the executors, sorted, so the message is the same on every call.
func staleSummary(executors []corev1.Pod) string {
	names := make([]string, 0, len(executors))
	for _, e := range executors {
		names = append(names, e.Name)
	}
	sort.Strings(names)
	const shown = 3
	more := ""
	if len(names) > shown {
		more = fmt.Sprintf(" and %d more", len(names)-shown)
		names = names[:shown]
	}
	return fmt.Sprintf("%d executor pod(s) of an earlier incarnation still exist (%s%s)", len(executors), strings.Join(names, ", "), more)
}
