package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/driverset/driverset/inspect"
	"github.com/driverset/driverset/version"
)

// fetch reads the Snapshot of the driver named on c's command line, with the client it used.
func (e *env) fetch(c *cobra.Command, name string) (kubernetes.Interface, *inspect.Snapshot, error) {
	client, ns, err := e.clientAndNamespace()
	if err != nil {
		return nil, nil, err
	}
	s, err := inspect.Fetch(c.Context(), client, ns, name)
	return client, s, err
}

func statusCommand(e *env) *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:   "status <driver>",
		Short: "The placeholder, the StatefulSet, the real driver pod, its node, restarts, recoveries, the outcome",
		Long: `Show what driverset made for one Spark driver: the placeholder spark-submit watches, the
StatefulSet and headless Service, the real driver pod (<statefulset>-0) and its node, its phase,
the restarts and recoveries, the controller's record of a lost driver, and the outcome.`,
		Example: `  # the status of the driver pod spark-submit made, in namespace spark-jobs
  kubectl driverset status pi-driver -n spark-jobs

  # the same as JSON (kind DriverStatus, apiVersion driverset.dev/v1), for scripts
  kubectl driverset status pi-driver -n spark-jobs -o json`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			_, s, err := e.fetch(c, args[0])
			if err != nil {
				return err
			}
			st := inspect.StatusOf(s)
			if output == "" {
				return inspect.WriteStatus(e.streams.Out, st)
			}
			return printDocument(e.streams.Out, output, statusDocument(st))
		},
	}
	addOutputFlag(c, &output)
	return c
}

func whyCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "why <driver>",
		Short: "The Events of the placeholder, the StatefulSet and every incarnation, in time order",
		Long: `Show the Events of the placeholder, its StatefulSet and every incarnation of its driver pod,
merged in time order; driverset's own decisions are marked with "*".`,
		Example: `  kubectl driverset why pi-driver -n spark-jobs`,
		Args:    exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			_, s, err := e.fetch(c, args[0])
			if err != nil {
				return err
			}
			return inspect.WriteWhy(e.streams.Out, s)
		},
	}
}

func logsCommand(e *env) *cobra.Command {
	var o inspect.LogOptions
	c := &cobra.Command{
		Use:   "logs <driver>",
		Short: "The log of the current incarnation's driver container",
		Long: `Print the log of the driver container of the current incarnation (the placeholder never
runs, so its own log is empty). With -f it follows until that container stops; a later incarnation
is a new pod: run logs again.`,
		Example: `  # the last 100 lines, with timestamps
  kubectl driverset logs pi-driver -n spark-jobs --tail 100 --timestamps

  # follow the log of the last 10 minutes
  kubectl driverset logs pi-driver -n spark-jobs -f --since 10m

  # the previous run of the container, after a restart in the same pod
  kubectl driverset logs pi-driver -n spark-jobs -p

  # a sidecar of the driver pod instead of the driver container
  kubectl driverset logs pi-driver -n spark-jobs -c istio-proxy`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if o.Since < 0 {
				return usageError("--since must be positive, got %s", o.Since)
			}
			client, s, err := e.fetch(c, args[0])
			if err != nil {
				return err
			}
			return inspect.StreamLogs(c.Context(), client, s, o, e.streams.Out)
		},
	}
	f := c.Flags()
	f.BoolVarP(&o.Follow, "follow", "f", false, "follow the log until the container stops")
	f.BoolVarP(&o.Previous, "previous", "p", false, "the log of the previous run of the container")
	f.BoolVar(&o.Timestamps, "timestamps", false, "begin each line with its RFC3339 timestamp")
	f.Int64Var(&o.Tail, "tail", -1, "the last N lines (-1: all)")
	f.StringVarP(&o.Container, "container", "c", "", "a container of the driver pod (default: the driver container)")
	f.DurationVar(&o.Since, "since", 0, "only lines newer than this duration, like 5s, 2m or 3h (0: all)")
	return c
}

func checkCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Ask the apiserver to admit an opted-in driver pod (dry run) and check that driverset converted it",
		Long: `Ask the apiserver to admit an opted-in driver pod in -n NAMESPACE as a dry run (nothing is
stored, nothing runs) and check that driverset converted it: the install check.`,
		Example: `  kubectl driverset check -n spark-jobs`,
		Args:    exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			client, ns, err := e.clientAndNamespace()
			if err != nil {
				return err
			}
			got, err := inspect.RunCheck(c.Context(), client, ns)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(e.streams.Out, "driverset converted the opted-in driver pod %s/%s (dry run): scheduling gates %v\n", ns, got.Name, got.Spec.SchedulingGates)
			return err
		},
	}
}

func versionCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "This build's version",
		Args:  exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(e.streams.Out, "kubectl-driverset %s\n", version.Get().String()[len("driverset "):])
			return err
		},
	}
}
