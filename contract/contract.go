// Package contract holds driverset's API: the labels, annotations and scheduling gates that users,
// admins and driverset's own components read and write, and the one function that names the
// objects driverset creates for a driver. These names are API: change them only on purpose.
package contract

import "time"

// Opt-in and policy.
const (
	// LabelResilient on a Spark driver pod opts it in. Users set it with
	// --conf spark.kubernetes.driver.label.driverset.dev/resilient=true.
	LabelResilient = "driverset.dev/resilient"
	// LabelPolicy on a Namespace with the value PolicyEnforce converts every Spark driver pod in it.
	LabelPolicy   = "driverset.dev/policy"
	PolicyEnforce = "enforce"
)

// What driverset sets on the objects it makes.
const (
	// LabelPlaceholder marks the admitted, never-scheduled driver pod that spark-submit posted.
	LabelPlaceholder = "driverset.dev/placeholder"
	// GatePlaceholder is the scheduling gate that keeps the placeholder off every node. It is never removed.
	GatePlaceholder = "driverset.dev/placeholder"
	// GateStaleExecutors holds a new driver incarnation while executors of an earlier one still exist.
	GateStaleExecutors = "driverset.dev/stale-executors"
	// FinalizerOutcome keeps a deleted driver pod (S-0, from the StatefulSet's pod template) until
	// driverset has read its driver's exit: the StatefulSet controller deletes a Failed pod at
	// once (an eviction), and a pod removed while driverset is down would take the exit with it.
	// On the placeholder (added at admission) it keeps a deleted app until its driver has stopped:
	// a pod that never ran is otherwise removed at once, while S-0 still stops or still runs.
	FinalizerOutcome = "driverset.dev/outcome"
	// LabelDriver names the StatefulSet that runs a driver; it is on the StatefulSet, its pod and
	// that pod's executors. The driver webhook never converts a pod that carries it.
	LabelDriver = "driverset.dev/driver"
	// SettingExecutorLabelDriver is the Spark setting with which S-0's driver labels its executors
	// LabelDriver=<S> at birth (convert.DriverConf writes it into S-0's command; wrap reads it back
	// there to label the executors' claims too).
	SettingExecutorLabelDriver = "spark.kubernetes.executor.label." + LabelDriver
	// AnnotationResources keeps, on the placeholder, the real resources of each container that the
	// webhook shrank (JSON, see convert.ContainerResources); the StatefulSet's template restores them.
	AnnotationResources = "driverset.dev/resources"
	// AnnotationRestarts counts, on the placeholder, the process-failure restarts of the current
	// run of failures: it starts again from 1 at a failure after a healthy run
	// (AnnotationRestartWindow). Every restart is also an Event and counted by the
	// driverset_driver_restarts_total metric.
	AnnotationRestarts = "driverset.dev/restarts"
	// AnnotationRestartsTotal counts, on the placeholder, every process-failure restart of the
	// app's life; it never goes down, and the placeholder's restartCount shows it. An app first
	// restarted by a driverset without it has its lifetime count in AnnotationRestarts.
	AnnotationRestartsTotal = "driverset.dev/restarts-total"
	// AnnotationRestartedIncarnation is the UID of the last driver pod that driverset replaced after a
	// process failure, so that one failure is never counted twice.
	AnnotationRestartedIncarnation = "driverset.dev/restarted-incarnation"
	// AnnotationDriverLost records, on the placeholder, that the running driver was lost (its node
	// went away or its pod was removed from outside): which pod, since when, and the recovery path.
	// It is cleared, and the recovery time measured, when a new incarnation runs.
	AnnotationDriverLost = "driverset.dev/driver-lost"
	// AnnotationAdmittedSettings remembers, on the StatefulSet, the driver's knobs as they were
	// admitted (JSON, annotation key to value): an invalid value edited onto the running app later
	// keeps these.
	AnnotationAdmittedSettings = "driverset.dev/admitted-settings"
	// LabelClaimAppSelector carries, on a claim that spark-submit made for the driver, the app id
	// that driverset moved off its spark-app-selector label: Spark's clean stop deletes every claim
	// with that label, and the next incarnation of the driver mounts this one.
	LabelClaimAppSelector = "driverset.dev/spark-app-selector"
)

// Knobs a user sets on the driver pod (spark.kubernetes.driver.annotation.<key>).
const (
	// AnnotationMaxRestarts: process-failure restarts allowed; node-loss recoveries are not counted.
	AnnotationMaxRestarts = "driverset.dev/max-restarts"
	DefaultMaxRestarts    = 3
	// AnnotationRestartWindow: a driver that ran at least this long before it failed had a healthy
	// run, so its failure starts a new run of failures: the restarts counted before are forgotten
	// (max-restarts is the budget of one run of failures) and the backoff starts again from the
	// first delay. "0" never forgets (max-restarts is a lifetime budget, as before this knob).
	AnnotationRestartWindow = "driverset.dev/restart-window"
	// DefaultRestartWindow suits a stream that runs for months: a driver that crash-loops (a bad
	// --conf, a missing class or table, an OOM at startup or on its first batches) fails within
	// minutes of each start, well inside an hour, and still exhausts max-restarts, while the
	// transient failures of a long run (a broker blip, object-store throttling) come hours or
	// days apart, each after an hour of healthy running, and are each restarted. An hour is also
	// far above the longest backoff (5 min by default), so the window is not consumed by waiting.
	// YARN's spark.yarn.am.attemptFailuresValidityInterval is off by default (a lifetime budget,
	// this knob's "0"); Flink's failure-rate restart strategy counts failures within an interval,
	// which is the behaviour a streaming job needs, hence a default that is on. The cost: a batch
	// job that fails the same way after more than an hour, every time, is restarted until it is
	// stopped; set 0 for such jobs.
	DefaultRestartWindow = time.Hour
	// AnnotationEntrypoint: the image's entrypoint, used when the driver container has no command.
	AnnotationEntrypoint = "driverset.dev/entrypoint"
	DefaultEntrypoint    = "/opt/entrypoint.sh"
	// AnnotationFenceAfter: force-delete a driver whose node has been unreachable this long (opt-in).
	AnnotationFenceAfter = "driverset.dev/fence-after"
	// AnnotationSelfFence: `driverset wrap` keeps a heartbeat Lease and stops the driver when it
	// cannot renew it for this long (a duration, or "on" for DefaultSelfFence); the controller then
	// fences a driver on an unreachable node once it has seen no renewal for that long plus a margin.
	AnnotationSelfFence = "driverset.dev/self-fence"
	SelfFenceOn         = "on"
	// DefaultSelfFence is T for "on": long enough that an apiserver outage stopping these drivers
	// is rare (control-plane restarts and upgrades take seconds to a minute), short enough that a
	// silent node death is recovered in minutes rather than never.
	DefaultSelfFence = 2 * time.Minute
)

// Self-fencing's heartbeat.
const (
	// LabelHeartbeat marks the Lease that `driverset wrap` renews for a driver incarnation; its
	// value is the driver's StatefulSet. driverset's informer watches only Leases with it.
	LabelHeartbeat = "driverset.dev/heartbeat"
	// EnvPodUID and EnvPodNamespace carry the running pod's UID and namespace into wrap (downward
	// API): the UID is the heartbeat's holder identity, so a later incarnation is told apart.
	EnvPodUID       = "DRIVERSET_POD_UID"
	EnvPodNamespace = "DRIVERSET_POD_NAMESPACE"
)

// What Spark puts on its pods (docs/spark-facts.md §2–3).
const (
	LabelSparkRole        = "spark-role"
	RoleDriver            = "driver"
	RoleExecutor          = "executor"
	LabelSparkAppSelector = "spark-app-selector"
	// DriverContainerName is the name Spark gives the driver container.
	DriverContainerName = "spark-kubernetes-driver"
	// EnvDriverURL is how an executor finds its driver.
	EnvDriverURL = "SPARK_DRIVER_URL"
)

// What driverset puts in the driver's template.
const (
	// EnvPodName carries the running pod's own name (downward API) into the driver's --conf.
	EnvPodName = "DRIVERSET_POD_NAME"
)
