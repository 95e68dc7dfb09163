// Package wrap is `driverset wrap`: the entry wrapper of a driverset driver container.
//
// A StatefulSet pod has restartPolicy Always, so the kubelet restarts every exited container in
// place; a finished batch driver would run again. wrap runs the real entrypoint at most once per
// pod. It keeps two files in a state directory (an emptyDir: it survives container restarts but
// not a new pod):
//
//   - "started", written before the child is started;
//   - "exit", the child's outcome, written when it ends. It holds a termination message
//     (Record: TerminationMessage's, then a last line saying whether a stop from outside, the
//     kubelet's SIGTERM, came before the end; StopOf reads it), the same text wrap writes to
//     the container's termination log.
//
// wrap is PID 1 of the container, so every orphaned process in it (the JVM's helpers, PySpark's
// Python workers, daemons) becomes its child. It reaps each one (and, when it is not PID 1, makes
// itself their reaper with PR_SET_CHILD_SUBREAPER), and it owns every wait, so the driver's exit
// status is never taken from it. When the driver exits, wrap ends every process still under it:
// SIGTERM, then SIGKILL after DefaultLeftoverGrace; it reaps them, and only then records the
// exit. So when wrap says the driver exited, nothing of the driver's process tree runs any more
// (but a process stuck in the kernel past SIGKILL, which is waited for a few seconds and counted
// in the record).
//
// On a restart wrap finds them and never starts the child again: with an exit record it rewrites
// the termination message and idles (still reaping) until the pod is stopped; with only a
// started marker the outcome was lost (wrap itself was killed) and it records ExitOutcomeLost. The controller reads
// the exit code from the termination message (ParseTerminationMessage), not from the container's
// exit code, which is 0 for an idling wrap that was stopped.
//
// Exit codes follow the shell's conventions, so they mean what users expect:
//
//	child exited with N        N
//	child killed by signal N   128+N
//	command not found          127 (ExitNotFound)
//	command not executable     126 (ExitCannotExecute)
//	wrap could not run safely  125 (ExitWrapFailed; as env(1), chroot(1), docker run): the child did not start
//	outcome lost               137 (ExitOutcomeLost = 128+SIGKILL)
//	idling wrap stopped        0
package wrap
