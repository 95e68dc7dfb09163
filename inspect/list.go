package inspect

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/driverset/driverset/contract"
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

// Rows builds the list of the placeholders among pods (those labelled driverset's placeholder),
// each with its current driver pod found among the same pods by the names driverset gives it,
// sorted by namespace and name. Pods lists what one List call returned: no further read, so a
// tenant who may list pods in a namespace sees its drivers.
func Rows(pods []corev1.Pod) []Row {
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		byName[pods[i].Namespace+"/"+pods[i].Name] = &pods[i]
	}
	var rows []Row
	for i := range pods {
		p := &pods[i]
		if p.Labels[contract.LabelPlaceholder] != "true" {
			continue
		}
		s := &Snapshot{Placeholder: p, Names: contract.NamesFor(p.Name)}
		s.Driver = driverAmong(byName, p.Namespace, s.Names)
		if s.Driver == nil { // a placeholder of an earlier driverset keeps its legacy names
			if legacy := contract.LegacyNamesFor(p.Name); legacy != s.Names {
				if d := driverAmong(byName, p.Namespace, legacy); d != nil {
					s.Names, s.Driver = legacy, d
				}
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

// driverAmong is the driver pod of names in ns among byName: the pod of that name that carries
// driverset's driver label for that StatefulSet (a pod of the same name made by someone else is not).
func driverAmong(byName map[string]*corev1.Pod, ns string, names contract.Names) *corev1.Pod {
	d := byName[ns+"/"+names.DriverPodName()]
	if d == nil || d.Labels[contract.LabelDriver] != names.StatefulSet {
		return nil
	}
	return d
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
