package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// The stale-executor gate: the executors that earlier incarnations of the driver left are removed
// before the gate that holds the new incarnation is lifted (their names collide with the ones the
// new driver makes, which reuses the executor name prefix on Spark 2.4/3.0; a driver of a template
// without an app id of its own per incarnation would also count them as its own failed executors;
// and they may still run tasks for a driver that is gone).

// observeExecutors lists, from the cache, the executors driverset labelled (executorsOf) that mine
// selects, and reads their Nodes from the cache.
func (r *Placeholder) observeExecutors(ctx context.Context, s *Snapshot, mine func(e *corev1.Pod) bool) error {
	at := r.now()
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, executorsOf(s.Driver.Value)...); err != nil {
		return err
	}
	var kept []corev1.Pod
	for i := range list.Items {
		if e := &list.Items[i]; mine(e) {
			kept = append(kept, *e)
		}
	}
	s.Executors = reading(kept, FromCache, at)
	if s.ExecutorNodes == nil {
		s.ExecutorNodes = map[string]Read[*corev1.Node]{}
	}
	for i := range kept {
		name := kept[i].Spec.NodeName
		if _, read := s.ExecutorNodes[name]; name == "" || read {
			continue
		}
		node, err := getCached(ctx, r, &corev1.Node{}, "", name)
		if err != nil {
			return err
		}
		s.ExecutorNodes[name] = node
	}
	return nil
}

// observeExecutorLeftovers reads, from the executor-set cache, Spark's executor StatefulSets of the
// incarnations of S-0 before this one (ExecutorSetsOfIncarnation), and the executor claims their
// drivers made (ExecutorClaimsOfIncarnation).
func (r *Placeholder) observeExecutorLeftovers(ctx context.Context, s *Snapshot) error {
	driver := s.Driver.Value
	at := r.now()
	sets, err := convert.ExecutorSetsOfIncarnation(ctx, r.ExecutorSets, driver.Namespace, driver.Name, driver.UID)
	if err != nil {
		return err
	}
	s.ExecutorSets = reading(sets, FromCache, at)
	claims, err := convert.ExecutorClaimsOfIncarnation(ctx, r.ExecutorSets, driver.Namespace, driver.Name, driver.UID)
	s.ExecutorClaims = reading(claims, FromCache, at)
	return err
}

// observeExecutorNodesLive reads from the apiserver each executor's Node that the cache says is
// proven down: a force-delete cannot be undone.
func (r *Placeholder) observeExecutorNodesLive(ctx context.Context, s *Snapshot) error {
	for i := range s.Executors.Value {
		e := &s.Executors.Value[i]
		name := e.Spec.NodeName
		if _, read := s.LiveNodes[name]; name == "" || read || provenDown(e, s.ExecutorNodes[name].Value) == "" {
			continue
		}
		node, err := r.liveNode(ctx, name)
		if err != nil {
			return err
		}
		s.LiveNodes[name] = node
	}
	return nil
}

// gatePlan is the stale-executor part of a plan: the deletions, and the gate lifted when none is
// left; Note is for P's status.
type gatePlan struct {
	Need  []Need
	Steps []Step
	Note  string
}

// planStaleExecutors removes the executors of incarnations earlier than S-0 (stale), and waits
// for their executor StatefulSets (Spark's StatefulSet allocator) and executor claims to be gone,
// then lifts the gate that holds S-0. When each executor is force-deleted and nothing else is
// left, the gate is lifted in the same pass, on the precondition that the apiserver lists no
// executor left (a finalizer may keep one), rather than a requeue later, once the cache says so.
// A set or a claim is never deleted here (the garbage collector removes it once its driver pod is
// gone; driverset may not delete StatefulSets, nor claims): it is waited for, since the next
// driver of a DStream app makes a set of the same name and reuses the claims of its app id, a
// Terminating one too.
func planStaleExecutors(s *Snapshot) gatePlan {
	p, driver := s.Placeholder.Value, s.Driver.Value
	if !s.Executors.Taken() {
		return gatePlan{Need: []Need{NeedExecutors}}
	}
	var g gatePlan
	n, forced := 0, 0
	for i := range s.Executors.Value {
		e := &s.Executors.Value[i]
		if !stale(e, p, driver) {
			continue
		}
		n++
		del, need := planExecutorDelete(e, s)
		switch {
		case need:
			g.Need = []Need{NeedExecutorNodesLive}
		case del != nil:
			g.Steps = append(g.Steps, *del)
			if del.Force {
				forced++
			}
		}
	}
	if len(g.Need) > 0 {
		return gatePlan{Need: g.Need}
	}
	collected := len(s.ExecutorSets.Value) + len(s.ExecutorClaims.Value)
	g.Note = staleNote(driver, n, s.ExecutorSets.Value, s.ExecutorClaims.Value)
	switch {
	case collected > 0:
	case n == 0:
		g.Steps = append(g.Steps, liftGateStep{})
	case forced == n:
		g.Steps = append(g.Steps, liftGateStep{UnlessStaleLive: true})
	}
	return g
}

// staleNote says what driver pod driver waits for: n stale executors, and the sets and claims the
// garbage collector is to remove (named, a few of each); "" when nothing.
func staleNote(driver *corev1.Pod, n int, sets, claims []metav1.PartialObjectMetadata) string {
	var what, names []string
	if n > 0 {
		what = append(what, fmt.Sprintf("%d executor(s)", n))
	}
	if len(sets) > 0 {
		what = append(what, fmt.Sprintf("%d executor StatefulSet(s)", len(sets)))
		names = append(names, setNames(sets))
	}
	if len(claims) > 0 {
		what = append(what, fmt.Sprintf("%d executor claim(s)", len(claims)))
		names = append(names, setNames(claims))
	}
	switch {
	case len(what) == 0:
		return ""
	case len(names) == 0:
		return fmt.Sprintf("driver pod %s waits for %s of the previous driver to be removed", podRef(driver), what[0])
	}
	list := strings.Join(what[:len(what)-1], ", ") + " and " + what[len(what)-1]
	if len(what) == 1 {
		list = what[0]
	}
	by := ""
	if n == 0 {
		by = " by the garbage collector"
	}
	return fmt.Sprintf("driver pod %s waits for %s of the previous driver to be removed%s (%s)", podRef(driver), list, by, strings.Join(names, "; "))
}

// setNames names a few of sets (or claims), in the order read, for a message.
func setNames(sets []metav1.PartialObjectMetadata) string {
	const shown = 3
	names := make([]string, 0, min(len(sets), shown))
	for i := range sets[:min(len(sets), shown)] {
		names = append(names, sets[i].Name)
	}
	if len(sets) > shown {
		return fmt.Sprintf("%s and %d more", strings.Join(names, ", "), len(sets)-shown)
	}
	return strings.Join(names, ", ")
}

// planExecutorDelete is how executor e goes, nil while it is waited for; need when e's Node must
// be read from the apiserver first. One that Spark's executor StatefulSet controls is waited for
// until the garbage collector deletes it. One on a node proven down (provenDown: deleted, or out of
// service; on the cache, then on the apiserver) is force-deleted at once, as the driver pod there;
// one already terminating on a node that is gone or not Ready is force-deleted, since no kubelet
// will ever confirm its end; one terminating on a Ready node is waited for.
func planExecutorDelete(e *corev1.Pod, s *Snapshot) (del *deleteExecutorStep, need bool) {
	if e.DeletionTimestamp == nil && convert.ExecutorSet(e) != "" {
		// Spark's StatefulSet allocator: the set would make the pod again at once. The garbage
		// collector deletes the set when its owner, the incarnation's S-0, is gone, and its pods
		// with it; one left Terminating on a lost node is then force-deleted below.
		return nil, false
	}
	name := e.Spec.NodeName
	cached := s.ExecutorNodes[name].Value
	force := false
	if name != "" && provenDown(e, cached) != "" {
		live, read := s.LiveNodes[name]
		if !read {
			return nil, true
		}
		force = provenDown(e, live) != ""
	}
	if !force && e.DeletionTimestamp != nil {
		if !deadNodeReleases(e, cached, false) {
			return nil, false
		}
		force = true
	}
	return &deleteExecutorStep{Pod: e, Force: force}, false
}

// executorsOf selects every executor driverset labelled in driver's namespace (driverset.dev/driver,
// given at birth by DriverConf or by the executor patch), whatever StatefulSet the label names: the
// label is self-declared, as the app id is, and may name another app's, so stale and ofApp decide
// by owner (convert.ExecutorOfApp). A DStream app submitted again under another name onto an old
// checkpoint restores the executor labels of the app that wrote it (Spark 3.5
// Checkpoint.createSparkConf reloads the driver's pod name, not them): its executors name that
// app's StatefulSet and are controlled by this one's driver pod. Not by app id either: every
// incarnation runs with an app id of its own (wrap.IncarnationAppID), so an earlier one's
// executors carry another.
func executorsOf(driver *corev1.Pod) []client.ListOption {
	return []client.ListOption{client.InNamespace(driver.Namespace),
		client.MatchingLabels{contract.LabelSparkRole: contract.RoleExecutor}, client.HasLabels{contract.LabelDriver}}
}

// stale reports whether executor e was made by an earlier incarnation than driver, of the app of
// placeholder p: it is of the app (ofApp) and its controller is not driver itself. Another app's
// executor that shares the namespace and claims the app id or the label is neither deleted nor
// waited for.
func stale(e, p, driver *corev1.Pod) bool {
	return ofApp(e, p, driver.Name) && metav1.GetControllerOf(e).UID != driver.UID
}

// ofApp reports whether executor e belongs to the app of placeholder p, whose driver pods are named
// driverName and whose submitted app id is p's spark-app-selector: convert.ExecutorOfApp, the rule
// the incarnation webhook holds a new incarnation by.
func ofApp(e, p *corev1.Pod, driverName string) bool {
	return convert.ExecutorOfApp(e, driverName, p.UID, p.Labels[contract.LabelSparkAppSelector])
}

// dropExecutorsOf deletes the executors of S-0, an incarnation about to be force-deleted on its
// lost node, and of the incarnations before it, as the gate would for the next one: done first, in
// the same pass, the next incarnation usually finds none left when it is admitted and is not held
// by the stale-executor gate at all, rather than waiting for a pass of its own (on a node that
// held many drivers, that pass is what the last one waits for). It observes and plans within the
// fence's apply, on s (whose LiveNodes hold the Nodes read live in this pass), and is best effort:
// whatever fails here is left to the gate, which holds the next incarnation until they are gone.
func (r *Placeholder) dropExecutorsOf(ctx context.Context, s *Snapshot) {
	p, driver := s.Placeholder.Value, s.Driver.Value
	mine := func(e *corev1.Pod) bool { return ofApp(e, p, driver.Name) }
	if r.observeExecutors(ctx, s, mine) != nil || r.observeExecutorNodesLive(ctx, s) != nil {
		return
	}
	for i := range s.Executors.Value {
		if del, _ := planExecutorDelete(&s.Executors.Value[i], s); del != nil {
			_ = r.deleteExecutor(ctx, *del)
		}
	}
}

// deleteExecutor deletes the executor st names, under the precondition of its UID; one already
// gone or replaced is no error.
func (r *Placeholder) deleteExecutor(ctx context.Context, st deleteExecutorStep) error {
	uid := st.Pod.UID
	opts := []client.DeleteOption{client.Preconditions{UID: &uid}}
	if st.Force {
		opts = append(opts, client.GracePeriodSeconds(0))
	}
	err := r.Client.Delete(ctx, st.Pod, opts...)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// liftGate lifts S-0's stale-executor gate, under its resourceVersion: the decision is for this
// incarnation as read. Applied by name alone, a decision made on a stale cache would lift the gate
// of the next incarnation, which the earlier one's executors (not stale for it) must still hold.
// With UnlessStaleLive, only once the apiserver lists no stale executor. It returns the note for
// P's status.
func (r *Placeholder) liftGate(ctx context.Context, p, driver *corev1.Pod, st liftGateStep) (string, error) {
	if st.UnlessStaleLive {
		n, err := r.staleExecutorsLive(ctx, p, driver)
		if err != nil {
			return "", err
		}
		if n > 0 {
			return fmt.Sprintf("driver pod %s waits for %d executor(s) of the previous driver to be removed", podRef(driver), n), nil
		}
	}
	patch := client.MergeFromWithOptions(driver.DeepCopy(), client.MergeFromWithOptimisticLock{})
	convert.RemoveGate(&driver.Spec, contract.GateStaleExecutors)
	if err := r.Client.Patch(ctx, driver, patch); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return fmt.Sprintf("driver pod %s changed; looking again", podRef(driver)), nil
		}
		return "", err
	}
	r.event(p, driver, corev1.EventTypeNormal, "ExecutorsCleared", "no executor of an earlier driver remains; driver pod %s may be scheduled", podRef(driver))
	return "", nil
}

// staleExecutorsLive counts, on the apiserver, the executors of p's app that driver does not own.
// The namespace's every labelled executor is read (executorsOf), so a page at a time: what it holds
// at once stays bounded however many executors the namespace has.
func (r *Placeholder) staleExecutorsLive(ctx context.Context, p, driver *corev1.Pod) (int, error) {
	n := 0
	opts := append(executorsOf(driver), client.Limit(livePage))
	for {
		var list corev1.PodList
		if err := r.apiReader().List(ctx, &list, opts...); err != nil {
			return 0, err
		}
		for i := range list.Items {
			if stale(&list.Items[i], p, driver) {
				n++
			}
		}
		if list.Continue == "" {
			return n, nil
		}
		opts = append(executorsOf(driver), client.Limit(livePage), client.Continue(list.Continue))
	}
}

// livePage is how many pods a live list reads at once.
const livePage = 500
