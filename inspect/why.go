package inspect

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/contract"
)

// ControllerName is the reporting controller of driverset's own Events (cmd/driverset/serve.go):
// its decisions.
const ControllerName = "driverset.dev/controller"

// Entry is one line of `kubectl driverset why`.
type Entry struct {
	Time time.Time
	// Object is what the entry is about: "placeholder", "statefulset/<name>" or "pod/<name> [uid]".
	Object string
	Type   string
	Reason string
	// From is who recorded it: a controller, the scheduler, a kubelet.
	From string
	// Decision is true for driverset's own decisions.
	Decision bool
	Count    int32
	Message  string
	// stored orders the entries of one second: the Event's resourceVersion.
	stored uint64
}

// Timeline is the Events of s's placeholder, StatefulSet and every incarnation of its pod, merged
// in time order. Events about other objects of the same name (another kind) are left out.
//
// Time order is to the second: the core/v1 Events of Kubernetes' controllers carry whole seconds,
// driverset's (events.k8s.io) microseconds, so within one second the entries are in the order the
// apiserver stored them (their resourceVersion, which grows on one etcd), not by sub-second times
// only some of them have.
func Timeline(s *Snapshot) []Entry {
	p := s.Placeholder
	var out []Entry
	for i := range s.Events {
		e := &s.Events[i]
		obj, ok := objectOf(e, p.Name, s.Names.StatefulSet, s.Names.DriverPodName())
		if !ok {
			continue
		}
		from := e.ReportingController
		if from == "" {
			from = e.Source.Component
		}
		if host := e.Source.Host; host != "" && from != ControllerName {
			from += " on " + host
		}
		out = append(out, Entry{
			Time: eventTime(e), Object: obj, Type: e.Type, Reason: e.Reason, From: from,
			Decision: from == ControllerName, Count: occurrences(e), Message: strings.TrimSpace(e.Message),
			stored: storedAt(e),
		})
	}
	if rec, ok := lostOf(p); ok {
		out = append(out, Entry{
			Time: rec.Since, Object: "placeholder", Type: "Record", Reason: "DriverLost", From: ControllerName, Decision: true, Count: 1,
			Message: fmt.Sprintf("annotation %s: driver pod uid %s lost, recovery path %s (open until a new incarnation runs)", contract.AnnotationDriverLost, rec.Pod, rec.Cause),
			stored:  math.MaxUint64, // written after the loss was seen: last in its second
		})
	}
	sort.SliceStable(out, func(i, j int) bool {
		ti, tj := out[i].Time.Truncate(time.Second), out[j].Time.Truncate(time.Second)
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return out[i].stored < out[j].stored
	})
	return out
}

// objectOf names the object e is about, when it is one of the driver's.
func objectOf(e *corev1.Event, placeholder, sts, driver string) (string, bool) {
	o := e.InvolvedObject
	switch {
	case o.Kind == "Pod" && o.Name == placeholder:
		return "placeholder", true
	case o.Kind == "StatefulSet" && o.Name == sts:
		return "statefulset/" + sts, true
	case o.Kind == "Pod" && o.Name == driver:
		if o.UID == "" { // the taint eviction controller's Events name no UID
			return "pod/" + driver, true
		}
		return fmt.Sprintf("pod/%s [%s]", driver, shortUID(string(o.UID))), true
	}
	return "", false
}

// eventTime is when e first happened: the new Events API sets eventTime, the old one firstTimestamp.
func eventTime(e *corev1.Event) time.Time {
	for _, t := range []time.Time{e.EventTime.Time, e.FirstTimestamp.Time, e.LastTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return e.CreationTimestamp.Time
}

// countEvents counts the occurrences of Events with reason on pod p (this very pod, by UID).
func countEvents(events []corev1.Event, p *corev1.Pod, reason string) int {
	n := 0
	for i := range events {
		e := &events[i]
		if e.Reason == reason && e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.UID == p.UID {
			n += int(occurrences(e))
		}
	}
	return n
}

// storedAt is e's resourceVersion as a number (0 when it is not one).
func storedAt(e *corev1.Event) uint64 {
	rv, _ := strconv.ParseUint(e.ResourceVersion, 10, 64)
	return rv
}

// occurrences is how often e happened: the new Events API counts in its series, the old one in count.
func occurrences(e *corev1.Event) int32 {
	if e.Series != nil {
		return max(e.Series.Count, 1)
	}
	return max(e.Count, 1)
}

func shortUID(uid string) string {
	if len(uid) > 8 {
		return uid[:8]
	}
	return uid
}

// WriteWhy prints s's timeline, or says that its Events are not visible to the user.
func WriteWhy(w io.Writer, s *Snapshot) error {
	if s.EventsNotVisible {
		_, err := fmt.Fprintf(w, "Events are %s.\n", NotVisibleEvents)
		return err
	}
	return WriteTimeline(w, Timeline(s))
}

// WriteTimeline prints entries as a table; driverset's own decisions are marked with "*".
func WriteTimeline(w io.Writer, entries []Entry) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintln(w, "No Events (the apiserver keeps them for an hour by default).")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tOBJECT\tTYPE\tREASON\tFROM\tMESSAGE")
	for _, e := range entries {
		reason := e.Reason
		if e.Decision {
			reason = "*" + reason
		}
		if e.Count > 1 {
			reason += fmt.Sprintf(" (x%d)", e.Count)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.UTC().Format(time.RFC3339), e.Object, e.Type, reason, e.From, e.Message)
	}
	fmt.Fprintln(tw, "* a decision of driverset's controller")
	return tw.Flush()
}
