package inspect

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// Row is one line of `kubectl driverset list`: one driver that driverset runs.
type Row struct {
	Namespace, Name string
	// Phase is the placeholder's (what spark-submit sees); Outcome says it in words (StatusOf's).
	Phase   corev1.PodPhase
	Outcome string
	// Restarts in the current run of failures and over the app's life, as StatusOf counts them.
	Restarts, TotalRestarts int
	// DriverPod and Node are the current incarnation's; "" when there is none or it is not bound.
	DriverPod, Node string
	Created         time.Time
}

// Listed is what `kubectl driverset list` reads: the pods and driverset's StatefulSets (labelled
// contract.LabelDriver) of a namespace (or all), one list call each. StatefulSetsNotVisible: the
// apiserver refused to list StatefulSets (Forbidden), and Rows guesses by name.
type Listed struct {
	Pods                   []corev1.Pod
	StatefulSets           []appsv1.StatefulSet
	StatefulSetsNotVisible bool
}

// Rows builds the list of the placeholders among l's pods (those labelled driverset's
// placeholder), sorted by namespace and name, each with its current driver pod: S-0 of the
// StatefulSet S the placeholder controls, whatever its name (convert.StatefulSetOf, as the
// controller finds it), found among the same pods and controlled by S. No further read, so a
// tenant who may list pods and StatefulSets in a namespace sees its drivers; one who may not list
// StatefulSets sees the driver pods of the names driverset gives (this build's, then the legacy
// ones), labelled for them.
func Rows(l Listed) []Row {
	byName := map[string]*corev1.Pod{}
	for i := range l.Pods {
		byName[l.Pods[i].Namespace+"/"+l.Pods[i].Name] = &l.Pods[i]
	}
	setsIn := map[string][]metav1.Object{}
	for i := range l.StatefulSets {
		s := &l.StatefulSets[i]
		setsIn[s.Namespace] = append(setsIn[s.Namespace], s)
	}
	var rows []Row
	for i := range l.Pods {
		p := &l.Pods[i]
		if p.Labels[contract.LabelPlaceholder] != "true" {
			continue
		}
		s := &Snapshot{Placeholder: p, Names: contract.NamesFor(p.Name)}
		if l.StatefulSetsNotVisible {
			s.Names, s.Driver = driverByName(byName, p)
		} else if sts := convert.StatefulSetOf(p, setsIn[p.Namespace]); sts != nil {
			s.Names = contract.NamesOfStatefulSet(sts.GetName())
			if d := byName[p.Namespace+"/"+s.Names.DriverPodName()]; d != nil && metav1.IsControlledBy(d, sts) {
				s.Driver = d
			}
		}
		st := StatusOf(s)
		r := Row{Namespace: p.Namespace, Name: p.Name, Phase: st.Phase, Outcome: st.Outcome,
			Restarts: st.Restarts, TotalRestarts: st.TotalRestarts, Created: p.CreationTimestamp.Time}
		if s.Driver != nil {
			r.DriverPod, r.Node = s.Driver.Name, s.Driver.Spec.NodeName
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Namespace != rows[j].Namespace {
			return rows[i].Namespace < rows[j].Namespace
		}
		return rows[i].Name < rows[j].Name
	})
	return rows
}

// driverByName is p's driver pod among byName by the names driverset gives p (this build's, then
// the legacy ones): the pod of that name that carries driverset's driver label for that
// StatefulSet (a pod of the same name made by someone else is not). Only a guess, for a reader
// who may not list StatefulSets.
func driverByName(byName map[string]*corev1.Pod, p *corev1.Pod) (contract.Names, *corev1.Pod) {
	current := contract.NamesFor(p.Name)
	for _, n := range contract.CandidateNamesFor(p.Name) {
		if d := byName[p.Namespace+"/"+n.DriverPodName()]; d != nil && d.Labels[contract.LabelDriver] == n.StatefulSet {
			return n, d
		}
	}
	return current, nil
}

// WriteRows prints rows as kubectl prints a list: a header, one line each, the age relative to now.
// withNamespace adds the NAMESPACE column (for every namespace).
func WriteRows(w io.Writer, rows []Row, withNamespace bool, now time.Time) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "No drivers that driverset runs.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	if withNamespace {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprintln(tw, "NAME\tPHASE\tRESTARTS\tDRIVER POD\tNODE\tAGE")
	for _, r := range rows {
		if withNamespace {
			fmt.Fprintf(tw, "%s\t", r.Namespace)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d (%d in all)\t%s\t%s\t%s\n", r.Name, orNone(string(r.Phase), "Pending"), r.Restarts, r.TotalRestarts,
			orNone(r.DriverPod, "<none>"), orNone(r.Node, "<none>"), age(r.Created, now))
	}
	return tw.Flush()
}

// age is kubectl's AGE column: how long since created.
func age(created, now time.Time) string {
	if created.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(created))
}

func orNone(v, none string) string {
	if v == "" {
		return none
	}
	return v
}
