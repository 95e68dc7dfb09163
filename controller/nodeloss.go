package controller

import (
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
)

// TaintOutOfService is the taint with which an admin confirms that a node is down; the
// controller-manager then deletes its pods (and the StatefulSet makes the driver again elsewhere).
const TaintOutOfService = "node.kubernetes.io/out-of-service"

// Recovery causes, as recorded on the placeholder and in metrics.
const (
	CauseNodeDeleted  = "node-deleted"
	CauseOutOfService = "out-of-service"
	CauseFenced       = "fenced"
	CauseSelfFenced   = "self-fenced"      // the driver's heartbeat stopped on an unreachable node: wrap has stopped it
	CauseNodeLost     = "node-unreachable" // the node came back, or the pod went some other way
	CausePodDeleted   = "pod-deleted"      // the driver pod vanished on a healthy node (eviction, drain, by hand)
	CauseNodeShutdown = "node-shutdown"    // the kubelet stopped the driver for its node's shutdown (spot/preemptible VM, upgrade)
	CauseEvicted      = "evicted"          // the kubelet or the scheduler stopped the driver to free the node (pressure, preemption)
)

// NodeLoss is what the controller makes of the node under the driver pod.
type NodeLoss struct {
	// Lost is true when the driver's node is gone or not Ready.
	Lost bool
	// Since is when the node stopped being Ready (or when the loss was first seen).
	Since time.Time
	// Cause is the recovery path under way.
	Cause string
	// Fence is true when driverset must force-delete the driver pod now; FenceIn, when positive,
	// is how long until it must.
	Fence   bool
	FenceIn time.Duration
	// Note tells the user what is happening and what an admin can do.
	Note string
}

// fencing reports whether driverset force-deletes the driver pod on its own, now or later; when
// false on a lost node, the wait ends only by an admin's hand (or the node's return).
func (l NodeLoss) fencing() bool { return l.Fence || l.FenceIn > 0 }

// assessNode is the node-loss policy (docs/design.md#node-loss) as a pure function. node is nil when the Node
// object does not exist; zone is the health of node's zone; fenceAfter 0 means never fence; hb is
// the driver's heartbeat when it self-fences (T 0: it does not).
//
// A node proven down (provenDown: deleted, or out of service) needs no policy: its driver pod is
// force-deleted at once. Fencing force-deletes a pod whose process may still run, so it is armed only where the node
// cannot be running it as far as Kubernetes can tell: Ready Unknown (the kubelet stopped
// reporting) and tainted unreachable by the node lifecycle controller, with a taint the next
// driver pod does not tolerate (deadAndAvoided: the NoSchedule one). Ready=False means the
// kubelet is up and reporting (PLEG unhealthy, a hung runtime): the driver usually still runs.
// And, as the node lifecycle controller stops evicting, fencing is held while the zone is
// disrupted: many nodes lost at once is more likely a partition than a disaster.
//
// A self-fencing driver (hb.T > 0) is fenced on an unreachable node only once the controller has
// seen no renewal of its heartbeat for hb.Wait(): by then wrap has killed it, whatever the node's
// link. fence-after and the zone check do not apply to it: its heartbeat is the proof, and it holds
// in a partition too. A node whose kubelet died but whose network works keeps a renewing driver.
func assessNode(driver *corev1.Pod, node *corev1.Node, zone Zone, fenceAfter time.Duration, hb Heartbeat, now time.Time) NodeLoss {
	if driver == nil || driver.Spec.NodeName == "" {
		return NodeLoss{}
	}
	name := driver.Spec.NodeName
	// What Kubernetes treats as proof of a node down for good is acted on at once, with neither
	// fence-after nor the zone check: PodGC acts on it too, only later (its 20 s tick, and 40 s
	// of quarantine after a Node deletion).
	switch provenDown(driver, node) {
	case CauseNodeDeleted:
		return NodeLoss{Lost: true, Since: now, Cause: CauseNodeDeleted, Fence: true,
			Note: fmt.Sprintf("node %s was deleted; driverset force-deletes the old driver pod so that the driver starts again on another node", name)}
	case CauseOutOfService:
		return NodeLoss{Lost: true, Since: notReadySince(node, now), Cause: CauseOutOfService, Fence: true,
			Note: fmt.Sprintf("node %s is out of service (tainted %s and not Ready); driverset force-deletes the old driver pod so that the driver starts again on another node", name, TaintOutOfService)}
	}
	ready := nodeReady(node)
	if ready != nil && ready.Status == corev1.ConditionTrue {
		return NodeLoss{}
	}
	since := notReadySince(node, now)
	l := NodeLoss{Lost: true, Since: since, Cause: CauseNodeLost}
	adminNote := fmt.Sprintf("An admin can delete the Node (kubectl delete node %s) or apply the taint %s=nodeshutdown:NoExecute", name, TaintOutOfService)
	if fenceAfter <= 0 && hb.T <= 0 {
		l.Note = fmt.Sprintf("node %s has not been Ready since %s; the driver pod is kept until the node is confirmed down, so that two drivers never run at once. "+
			"%s; or set the driver annotation driverset.dev/fence-after",
			name, since.UTC().Format(time.RFC3339), adminNote)
		return l
	}
	switch {
	case ready != nil && ready.Status == corev1.ConditionFalse:
		l.Note = fmt.Sprintf("node %s is not Ready since %s but its kubelet still reports, so the driver may still run there: its pod is not force-deleted. %s",
			name, since.UTC().Format(time.RFC3339), adminNote)
		return l
	case !hasTaint(node, corev1.TaintNodeUnreachable) || !deadAndAvoided(node, driver.Spec.Tolerations):
		// The unreachable NoExecute taint alone is not enough: a pod tolerates it for 300 s by
		// default, so the scheduler would bind the next S-0 right back to the dead node.
		l.Note = fmt.Sprintf("node %s has not been Ready since %s; its pod is force-deleted only once the node is tainted %s:%s, which keeps the next driver pod off it. %s",
			name, since.UTC().Format(time.RFC3339), corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule, adminNote)
		return l
	case hb.T > 0:
		return selfFence(l, name, hb)
	case zone.disrupted():
		l.Note = fmt.Sprintf("node %s has not been Ready since %s, with %d of %d nodes in its zone: a disruption that large is more likely a partition, so the driver pod is not force-deleted. %s",
			name, since.UTC().Format(time.RFC3339), zone.NotReady, zone.Total, adminNote)
		return l
	}
	at := since.Add(fenceAfter)
	if !now.Before(at) {
		l.Fence, l.Cause = true, CauseFenced
	} else {
		l.FenceIn = at.Sub(now)
	}
	l.Note = fmt.Sprintf("node %s has not been Ready since %s; driverset will force-delete the driver pod at %s (fence-after %s) and start it elsewhere",
		name, since.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339), fenceAfter)
	return l
}

// selfFence completes l for a self-fencing driver on an unreachable node.
func selfFence(l NodeLoss, node string, hb Heartbeat) NodeLoss {
	wait := hb.Wait()
	if hb.Silent >= wait {
		l.Fence, l.Cause = true, CauseSelfFenced
	} else {
		l.FenceIn = wait - hb.Silent
	}
	l.Note = fmt.Sprintf("node %s has not been Ready since %s; the driver stops itself when its heartbeat cannot be renewed for %s, "+
		"and driverset force-deletes its pod and starts it elsewhere once it has seen no renewal for %s (seen none for %s)",
		node, l.Since.UTC().Format(time.RFC3339), hb.T, wait, hb.Silent.Round(time.Second))
	return l
}

// unhealthyZoneThreshold is the node lifecycle controller's default --unhealthy-zone-threshold.
const unhealthyZoneThreshold = 0.55

// Zone is how many nodes of one zone are not Ready, counted as the node lifecycle controller does.
type Zone struct {
	NotReady, Total int
}

// disrupted is the node lifecycle controller's zone state, full or partial disruption: every node
// not Ready, or more than 2 and at least unhealthyZoneThreshold of them. It stops (or, in a small
// cluster, also for a partial disruption) evicting there; driverset stops fencing.
func (z Zone) disrupted() bool {
	if z.Total == 0 || z.NotReady == 0 {
		return false
	}
	return z.NotReady == z.Total || z.NotReady > 2 && float64(z.NotReady)/float64(z.Total) >= unhealthyZoneThreshold
}

// zoneOf counts the nodes in node's zone (its region and zone labels; nodes without them are one
// zone) that are not Ready.
func zoneOf(node *corev1.Node, nodes []corev1.Node) Zone {
	var z Zone
	if node == nil {
		return z
	}
	key := zoneKey(node)
	for i := range nodes {
		if zoneKey(&nodes[i]) != key {
			continue
		}
		z.Total++
		if c := nodeReady(&nodes[i]); c == nil || c.Status != corev1.ConditionTrue {
			z.NotReady++
		}
	}
	return z
}

func zoneKey(n *corev1.Node) string {
	return n.Labels[corev1.LabelTopologyRegion] + "\x00" + n.Labels[corev1.LabelTopologyZone]
}

// notReadySince is when node stopped being Ready, or now when it does not say.
func notReadySince(node *corev1.Node, now time.Time) time.Time {
	if c := nodeReady(node); c != nil && !c.LastTransitionTime.IsZero() {
		return c.LastTransitionTime.Time
	}
	return now
}

func nodeReady(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// deadNodeReleases reports whether pod, Terminating on node (its Node as read; nil: gone), may be
// force-deleted as far as the node goes: the node is gone or not Ready, so no kubelet will confirm
// the deletion. When a successor takes its place (the StatefulSet's next incarnation), the
// scheduler must also keep that one off the node first (deadAndAvoided); a stale executor has none.
func deadNodeReleases(pod *corev1.Pod, node *corev1.Node, successor bool) bool {
	if pod.Spec.NodeName == "" || node == nil {
		return true
	}
	if successor {
		return deadAndAvoided(node, pod.Spec.Tolerations)
	}
	return !nodeReadyTrue(node)
}

// deadAndAvoided is the node half of every force-delete on a lost node (a restarted driver's
// recorded exit, an executor being cleared, fencing): the node is not Ready, so no kubelet will
// confirm the deletion, and the scheduler will not place the next incarnation (same
// tolerations) on it. The node lifecycle controller taints a node
// that stopped being Ready a moment after its condition changes; a force-delete in between has
// the StatefulSet's next pod scheduled onto the dead node, where it never starts and is held as
// a lost driver. A pod that tolerates even that taint gains nothing by waiting.
func deadAndAvoided(node *corev1.Node, tolerations []corev1.Toleration) bool {
	if c := nodeReady(node); c != nil && c.Status == corev1.ConditionTrue {
		return false
	}
	lifecycle := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}
	if tolerated(tolerations, &lifecycle) {
		return true
	}
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectPreferNoSchedule && !tolerated(tolerations, t) {
			return true
		}
	}
	return false
}

func tolerated(tolerations []corev1.Toleration, t *corev1.Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(logr.Discard(), t, false) {
			return true
		}
	}
	return false
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// provenDown returns the recovery cause when Kubernetes itself holds pod's node to be down for
// good, under the conditions of its PodGC (pkg/controller/podgc): the Node object is gone
// (node nil: NotFound), or the node is not Ready and carries the out-of-service taint. PodGC
// force-deletes only pods already terminating there, which for a running pod means the taint
// eviction controller evicted it: so the taint must be NoExecute and not tolerated by pod. It
// returns "" otherwise. Callers act on it only after reading the Node live, as PodGC does with
// a GET before it deletes the pods of a node missing from its cache.
func provenDown(pod *corev1.Pod, node *corev1.Node) string {
	if node == nil {
		return CauseNodeDeleted
	}
	if c := nodeReady(node); c != nil && c.Status == corev1.ConditionTrue {
		return ""
	}
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Key == TaintOutOfService && t.Effect == corev1.TaintEffectNoExecute && !tolerates(pod, t) {
			return CauseOutOfService
		}
	}
	return ""
}

func tolerates(pod *corev1.Pod, t *corev1.Taint) bool {
	for i := range pod.Spec.Tolerations {
		// Comparison operators (Lt, Gt) are held not to match, as where that feature is off: such a
		// toleration cannot be meant for this taint, whose value is free text.
		if pod.Spec.Tolerations[i].ToleratesTaint(logr.Discard(), t, false) {
			return true
		}
	}
	return false
}
