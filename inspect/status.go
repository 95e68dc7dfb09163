package inspect

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
	"github.com/driverset/driverset/wrap"
)

// ReasonRecovered is the reason of the Event the controller records on the placeholder each time
// a new incarnation runs after the driver was lost (controller/recovery.go).
const ReasonRecovered = "Recovered"

// Status is what `kubectl driverset status` reports about one driver.
type Status struct {
	Namespace, Placeholder, AppID string
	// RunsAs is the app id the current incarnation's driver runs with, its own
	// (wrap.Options.RunsAs); "" when it runs with AppID or there is none. PropertiesNotVisible
	// says that the driver's properties file could not be read, so an id cut for Spark's
	// StatefulSet allocator by a setting there is not known.
	RunsAs               string
	PropertiesNotVisible bool
	// Phase and Message are the placeholder's: what spark-submit sees. Outcome says the same in words.
	Phase   corev1.PodPhase
	Message string
	Outcome string
	// StatefulSet and Service are "" until the StatefulSet exists.
	StatefulSet, Service string
	// Driver describes the current incarnation; "" when there is none.
	Driver string
	// Node describes Driver's node; "" when it is not bound.
	Node string
	// Restarts made after process failures in the current run of failures, of MaxRestarts
	// allowed; TotalRestarts made over the app's life. A failure after a run of RestartWindow
	// (0: never) begins a new run of failures.
	Restarts, TotalRestarts, MaxRestarts int
	RestartWindow                        time.Duration
	// Recoveries counts the Recovered Events still kept (the apiserver expires Events, by default after 1h).
	Recoveries int
	// NodeNotVisible and EventsNotVisible say that the apiserver refused to show the user the
	// driver's Node or the Events (Forbidden): Node or Recoveries then say "not visible".
	NodeNotVisible, EventsNotVisible bool
	// Lost is the controller's record that the running driver was lost; "" when none is open.
	Lost string
}

// lostRecord is the value of contract.AnnotationDriverLost, as the controller writes it.
type lostRecord struct {
	Pod   string    `json:"pod"`
	Since time.Time `json:"since"`
	Cause string    `json:"cause"`
}

// StatusOf builds the Status of s.
func StatusOf(s *Snapshot) Status {
	p := s.Placeholder
	st := Status{
		Namespace:   p.Namespace,
		Placeholder: p.Name,
		AppID:       p.Labels[contract.LabelSparkAppSelector],
		Phase:       p.Status.Phase,
		Message:     p.Status.Message,
		Outcome:     outcome(p),
		MaxRestarts: contract.DefaultMaxRestarts,
		Recoveries:  countEvents(s.Events, p, ReasonRecovered),
		Lost:        lost(p),

		NodeNotVisible:   s.NodeNotVisible,
		EventsNotVisible: s.EventsNotVisible,
	}
	st.Restarts, _ = strconv.Atoi(p.Annotations[contract.AnnotationRestarts])
	if n, err := strconv.Atoi(p.Annotations[contract.AnnotationMaxRestarts]); err == nil && n >= 0 {
		st.MaxRestarts = n
	}
	total, _ := strconv.Atoi(p.Annotations[contract.AnnotationRestartsTotal])
	st.TotalRestarts = max(total, st.Restarts) // an older driverset counted all of them in restarts
	st.RestartWindow = contract.DefaultRestartWindow
	if v, ok := p.Annotations[contract.AnnotationRestartWindow]; ok {
		if s, err := convert.SettingsOf(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{contract.AnnotationRestartWindow: v}}}); err == nil {
			st.RestartWindow = s.RestartWindow
		}
	}
	if s.StatefulSet != nil {
		st.StatefulSet, st.Service = s.Names.StatefulSet, s.Names.Service
	}
	if d := s.Driver; d != nil {
		st.Driver = driverLine(d, driverContainer(p))
		st.RunsAs = runsAs(d, driverContainer(p), s.Properties)
		st.PropertiesNotVisible = s.PropertiesNotVisible
		if d.Spec.NodeName != "" {
			st.Node = nodeLine(d.Spec.NodeName, s.Node, s.NodeMissing, s.NodeNotVisible)
		}
	}
	return st
}

// runsAs is the app id the driver in pod d runs with when wrap gives it one of its own: read from
// what its container named container runs (command and args, as the kubelet joins them), with
// wrap's own parser and decision (what runs is what counts), and properties, the properties
// file that command names (nil when unknown).
func runsAs(d *corev1.Pod, container string, properties []byte) string {
	for _, c := range d.Spec.Containers {
		if c.Name != container {
			continue
		}
		o, isWrap, err := wrap.CommandOptions(slices.Concat(c.Command, c.Args))
		if !isWrap || err != nil || o.SparkAppID == "" {
			return ""
		}
		read := func(string) ([]byte, error) {
			if properties == nil {
				return nil, os.ErrNotExist
			}
			return properties, nil
		}
		id, err := o.RunsAs(string(d.UID), read)
		if err != nil {
			return ""
		}
		return id
	}
	return ""
}

// outcome is the app's state as spark-submit sees it on the placeholder, with the exit code once final.
func outcome(p *corev1.Pod) string {
	var term *corev1.ContainerStateTerminated
	for i := range p.Status.ContainerStatuses {
		if t := p.Status.ContainerStatuses[i].State.Terminated; t != nil {
			term = t
		}
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return "Succeeded: the app has ended"
	case corev1.PodFailed:
		if term != nil {
			return fmt.Sprintf("Failed: the driver exited with code %d", term.ExitCode)
		}
		return "Failed"
	case corev1.PodRunning:
		return "Running"
	case "":
		return "Pending"
	}
	return string(p.Status.Phase)
}

// driverLine describes the driver pod d: which incarnation, its phase, and its driver container.
func driverLine(d *corev1.Pod, container string) string {
	parts := []string{fmt.Sprintf("%s (uid %s)", d.Name, d.UID), string(d.Status.Phase)}
	if d.DeletionTimestamp != nil {
		parts = append(parts, "Terminating since "+d.DeletionTimestamp.UTC().Format(time.RFC3339))
	}
	for _, g := range d.Spec.SchedulingGates {
		parts = append(parts, "gated by "+g.Name)
	}
	for i := range d.Status.ContainerStatuses {
		cs := &d.Status.ContainerStatuses[i]
		if cs.Name != container {
			continue
		}
		switch {
		case cs.State.Running != nil:
			parts = append(parts, fmt.Sprintf("container %s running since %s", cs.Name, cs.State.Running.StartedAt.UTC().Format(time.RFC3339)))
		case cs.State.Terminated != nil:
			parts = append(parts, fmt.Sprintf("container %s exited with code %d", cs.Name, cs.State.Terminated.ExitCode))
		case cs.State.Waiting != nil:
			parts = append(parts, fmt.Sprintf("container %s waiting (%s)", cs.Name, cs.State.Waiting.Reason))
		}
		if cs.RestartCount > 0 {
			parts = append(parts, fmt.Sprintf("kubelet restarts %d", cs.RestartCount))
		}
	}
	return strings.Join(parts, ", ")
}

// nodeLine describes the driver's node: Ready or not since when, and the taints that decide a
// lost node's fate (unreachable, out-of-service).
func nodeLine(name string, n *corev1.Node, missing, notVisible bool) string {
	if notVisible {
		return name + ": " + NotVisibleNodes
	}
	if missing || n == nil {
		return name + ": deleted (the Node object does not exist)"
	}
	line := name + ": Ready"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			line = fmt.Sprintf("%s: not Ready (%s) since %s", name, c.Status, c.LastTransitionTime.UTC().Format(time.RFC3339))
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady || t.Key == outOfService {
			line += fmt.Sprintf(", tainted %s:%s", t.Key, t.Effect)
		}
	}
	return line
}

// What status and why say when the apiserver refuses to show Nodes or Events (Forbidden).
const (
	NotVisibleNodes  = "not visible (you may not read Nodes; a cluster admin can tell whether the node is Ready)"
	NotVisibleEvents = "not visible (you may not list Events in this namespace)"
)

// outOfService is the taint with which an admin confirms that a node is down.
const outOfService = "node.kubernetes.io/out-of-service"

// lostOf reads the controller's open record of a lost driver on p.
func lostOf(p *corev1.Pod) (lostRecord, bool) {
	var rec lostRecord
	v, ok := p.Annotations[contract.AnnotationDriverLost]
	if !ok || json.Unmarshal([]byte(v), &rec) != nil {
		return rec, false
	}
	return rec, true
}

// lost describes the controller's open record of a lost driver on p.
func lost(p *corev1.Pod) string {
	v, ok := p.Annotations[contract.AnnotationDriverLost]
	if !ok {
		return ""
	}
	rec, ok := lostOf(p)
	if !ok {
		return fmt.Sprintf("unreadable %s annotation %q", contract.AnnotationDriverLost, v)
	}
	return fmt.Sprintf("driver pod uid %s lost since %s (recovery path: %s)", rec.Pod, rec.Since.UTC().Format(time.RFC3339), rec.Cause)
}

// driverContainer is the name of p's driver container, as driverset chose it.
func driverContainer(p *corev1.Pod) string {
	if i, err := convert.DriverContainerIndex(p); err == nil {
		return p.Spec.Containers[i].Name
	}
	return contract.DriverContainerName
}

// WriteStatus prints st as aligned "field  value" lines.
func WriteStatus(w io.Writer, st Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	or := func(v, none string) string {
		if v == "" {
			return none
		}
		return v
	}
	row("Driver", fmt.Sprintf("%s/%s (the pod spark-submit made and watches; it never runs)", st.Namespace, st.Placeholder))
	if st.RunsAs != "" {
		unsure := ""
		if st.PropertiesNotVisible {
			unsure = "; or cut shorter if its properties file, in a ConfigMap you may not read, chooses Spark's StatefulSet executor allocator"
		}
		row("App id", fmt.Sprintf("%s (this incarnation runs as %s%s)", or(st.AppID, "(none)"), st.RunsAs, unsure))
	} else {
		row("App id", or(st.AppID, "(none)"))
	}
	row("Outcome", st.Outcome)
	row("Message", or(st.Message, "(none)"))
	if st.StatefulSet == "" {
		row("StatefulSet", "(not made yet)")
	} else {
		row("StatefulSet", fmt.Sprintf("%s, headless Service %s", st.StatefulSet, st.Service))
	}
	row("Driver pod", or(st.Driver, "(none)"))
	row("Node", or(st.Node, "(none)"))
	forgotten := "never forgotten (restart-window 0)"
	if st.RestartWindow > 0 {
		forgotten = "forgotten after a run of " + convert.ShortDuration(st.RestartWindow)
	}
	row("Restarts", fmt.Sprintf("%d of %d in this run of failures (after the driver process failed; %d in all; %s)",
		st.Restarts, st.MaxRestarts, st.TotalRestarts, forgotten))
	if st.EventsNotVisible {
		row("Recoveries", NotVisibleEvents)
	} else {
		row("Recoveries", fmt.Sprintf("%d (new incarnations after a lost driver, from the Events still kept)", st.Recoveries))
	}
	row("Lost driver", or(st.Lost, "(none)"))
	return tw.Flush()
}
