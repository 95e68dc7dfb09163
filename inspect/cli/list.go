package cli

import (
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/inspect"
)

// now is the clock of list's AGE column (tests set it).
var now = time.Now

func listCommand(e *env) *cobra.Command {
	var output string
	var all bool
	c := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "The drivers that driverset runs in a namespace (-A: in every namespace)",
		Long: `List the drivers that driverset runs: each placeholder spark-submit made, its phase, the
restarts in this run of failures (and in all), its current driver pod and that pod's node, and
its age. It reads the namespace's pods and driverset's StatefulSets (one list call each), so a
namespace's tenant can run it; a driver's StatefulSet is the one its placeholder controls,
whatever its name. One who may not list StatefulSets sees the driver pods of the names driverset
gives.`,
		Example: `  kubectl driverset list -n spark-jobs

  # every namespace you may list pods in
  kubectl driverset list -A

  kubectl driverset list -n spark-jobs -o yaml`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			client, ns, err := e.clientAndNamespace()
			if err != nil {
				return err
			}
			if all {
				ns = metav1.NamespaceAll
			}
			// Placeholders and driver pods carry different labels: list the namespace's pods once.
			pods, err := client.CoreV1().Pods(ns).List(c.Context(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			// S is the StatefulSet a placeholder controls, whatever its name: list driverset's.
			listed := inspect.Listed{Pods: pods.Items}
			sets, err := client.AppsV1().StatefulSets(ns).List(c.Context(), metav1.ListOptions{LabelSelector: contract.LabelDriver})
			switch {
			case apierrors.IsForbidden(err):
				listed.StatefulSetsNotVisible = true
			case err != nil:
				return err
			default:
				listed.StatefulSets = sets.Items
			}
			rows := inspect.Rows(listed)
			if output != "" {
				return printDocument(e.streams.Out, output, listDocument(rows))
			}
			return inspect.WriteRows(e.streams.Out, rows, all, now())
		},
	}
	c.Flags().BoolVarP(&all, "all-namespaces", "A", false, "list the drivers of every namespace")
	addOutputFlag(c, &output)
	return c
}
