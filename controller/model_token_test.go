package controller

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/contract"
)

// A stolen driverset token in the model (issue 35; kindToken). driverset's ServiceAccount may
// delete Spark's pods and take its finalizer off them, and the two webhook entries that judge it
// admit a force-delete of a driver pod only on ForceDeletion's proof (deletes.driverset.dev) and a
// removal of driverset.dev/outcome only on MayRelease's (releases.driverset.dev). The harness and
// the model already hold driverset itself to them (cluster.delete, cluster.checkRelease); these
// events hold the entries to the promises: whoever has the token may, at any moment, do whatever
// they admit in that state, and no promise may break. (A graceful delete needs no token: every
// user may make one, kindDelete.)
const kindToken = "token"

// tokenEvents are the token's writes the entries admit in w, asked as they ask: of the pod as it
// is stored, with the placeholder, Node and heartbeat read from the apiserver.
func (w *mworld) tokenEvents() []mevent {
	if !w.cfg.has(kindToken) || w.m.Down {
		return nil // with driverset down, both entries fail closed
	}
	gate := w.reconciler(w.h.c, nil)
	var out []mevent
	if d := w.h.driver(); d != nil {
		if ok, _, err := gate.ForceDeletion(w.ctx, d); err == nil && ok && !forceDeleted(d) {
			out = append(out, mevent{name: "a stolen token force-deletes S-0 (deletes.driverset.dev admits it)", kind: kindToken, apply: func(w *mworld) {
				w.deletePod(w.h.driver(), true)
			}})
		}
		if ok, _, err := gate.MayRelease(w.ctx, d); err == nil && ok && slices.Contains(d.Finalizers, contract.FinalizerOutcome) {
			out = append(out, mevent{name: "a stolen token takes driverset's finalizer off S-0 (releases.driverset.dev admits it)", kind: kindToken, apply: func(w *mworld) {
				w.takeFinalizerOff(w.h.driver())
			}})
		}
	}
	if p := w.placeholder(); p != nil && slices.Contains(p.Finalizers, contract.FinalizerOutcome) {
		if ok, _, err := gate.MayRelease(w.ctx, p); err == nil && ok {
			out = append(out, mevent{name: "a stolen token takes driverset's finalizer off the placeholder (releases.driverset.dev admits it)", kind: kindToken, apply: func(w *mworld) {
				w.takeFinalizerOff(w.placeholder())
			}})
		}
	}
	return out
}

// takeFinalizerOff removes driverset's finalizer from pod, as the stored version has it.
func (w *mworld) takeFinalizerOff(pod *corev1.Pod) {
	patch := client.MergeFromWithOptions(pod.DeepCopy(), client.MergeFromWithOptimisticLock{})
	pod.Finalizers = slices.DeleteFunc(slices.Clone(pod.Finalizers), func(f string) bool { return f == contract.FinalizerOutcome })
	if err := w.h.c.Patch(w.ctx, pod, patch); err != nil && !apierrors.IsNotFound(err) {
		w.t.Fatalf("take the finalizer off pod %s: %v", pod.Name, err)
	}
}
