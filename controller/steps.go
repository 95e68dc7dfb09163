package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Step is one thing a pass does, as plan decides it: a write with its precondition, an Event or a
// metric. apply (apply.go) runs them in order, each only once every write before it succeeded, so
// an Event never tells of a write that failed and a crash between two writes leaves the first one
// to be read by the next pass.
type Step interface{ isStep() }

// recordRestartStep counts a restart on P (its restart annotations, contract.AnnotationRestarts
// and friends), under P's resourceVersion, before the incarnation is deleted: a crash between the
// two never loses or doubles a count.
type recordRestartStep struct {
	Used, Total int
	Incarnation types.UID
}

// deleteDriverStep deletes S-0, under the precondition of its UID (the incarnation decided on, not
// whatever bears its name now); Force with a grace period of 0.
type deleteDriverStep struct {
	UID   types.UID
	Force bool
}

// recordLossStep sets P's loss record (nil: clears it), under P's resourceVersion.
type recordLossStep struct {
	Record *lostRecord
}

// releaseDriverStep removes driverset's finalizer from the deleted S-0, under its resourceVersion
// (letGo).
type releaseDriverStep struct{}

// fenceStep force-deletes S-0 on its lost node, under the precondition of its UID, after deleting
// its executors and, with Release, letting its finalizer go. Then are the steps told once the
// delete went through; the pass ends there (the pod's deletion brings the next one at once).
type fenceStep struct {
	UID     types.UID
	Release bool
	Then    []Step
}

// eventStep records an Event on P; Related, when not nil, is the object it is about.
type eventStep struct {
	Related            client.Object
	Type, Reason, Note string
}

// countRestartStep, countFenceStep and countRecoveryStep are driverset's metrics of a restart, a
// fence and a recovery (Metrics).
type countRestartStep struct{}

type countFenceStep struct{}

type countRecoveryStep struct {
	Cause string
	Took  time.Duration
}

// deleteExecutorStep deletes executor Pod, under the precondition of its UID; Force with a grace
// period of 0.
type deleteExecutorStep struct {
	Pod   *corev1.Pod
	Force bool
}

// liftGateStep lifts S-0's stale-executor gate, under S-0's resourceVersion. With UnlessStaleLive,
// only when the apiserver lists no stale executor (the cache may still show force-deleted ones);
// else, or when S-0 changed, the note it returns replaces the Note of the writeStatusStep after it.
type liftGateStep struct {
	UnlessStaleLive bool
}

// writeStatusStep writes the status placeholderStatus gives View on P, when it changed, under P's
// resourceVersion, and the Events of its transitions (statusEvents).
type writeStatusStep struct {
	View View
}

// scaleToZeroStep scales S to 0, which deletes S-0: only after P's final status is written, since a
// pod being deleted has no outcome. Without a precondition: 0 is never wrong for an app that has
// ended or is deleted.
type scaleToZeroStep struct{}

// keepClaimStep writes After, a claim of the driver's taken out of Spark's clean stop, as a patch
// from Before, under the resourceVersion Before was read at.
type keepClaimStep struct {
	Before, After *corev1.PersistentVolumeClaim
}

func (keepClaimStep) isStep() {}

// ensureStep makes H and S from P as the apiserver has it, when they do not exist (create-or-get,
// ensure), and keeps what it made in the snapshot (Ensured).
type ensureStep struct{}

// setReplicasStep sets S's replicas, under S's resourceVersion; Then are told once that went
// through.
type setReplicasStep struct {
	Replicas int32
	Then     []Step
}

func (ensureStep) isStep()      {}
func (setReplicasStep) isStep() {}

// releasePlaceholderStep lets the deleted P go (letGo): its driver has stopped.
type releasePlaceholderStep struct{}

func (releasePlaceholderStep) isStep() {}
func (recordRestartStep) isStep()      {}
func (deleteDriverStep) isStep()       {}
func (recordLossStep) isStep()         {}
func (releaseDriverStep) isStep()      {}
func (fenceStep) isStep()              {}
func (eventStep) isStep()              {}
func (countRestartStep) isStep()       {}
func (countFenceStep) isStep()         {}
func (countRecoveryStep) isStep()      {}
func (deleteExecutorStep) isStep()     {}
func (liftGateStep) isStep()           {}
func (writeStatusStep) isStep()        {}
func (scaleToZeroStep) isStep()        {}
