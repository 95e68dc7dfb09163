package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/driverset/driverset/inspect"
)

// APIVersion versions the documents that -o json|yaml print. Their fields are a promise to
// scripts: add fields, never rename or drop one without a new version.
const APIVersion = "driverset.dev/v1"

// outputs are the values of -o; "" is the human table.
var outputs = []string{"json", "yaml"}

func addOutputFlag(c *cobra.Command, output *string) {
	c.Flags().StringVarP(output, "output", "o", "", "print as "+strings.Join(outputs, " or ")+" instead of a table")
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputs, cobra.ShellCompDirectiveNoFileComp))
}

func checkOutput(output string) error {
	if output != "" && output != "json" && output != "yaml" {
		return usageError("-o %q: want one of %s", output, strings.Join(outputs, ", "))
	}
	return nil
}

// printDocument writes doc as JSON (indented, as kubectl does) or YAML.
func printDocument(w io.Writer, output string, doc any) error {
	b, err := json.MarshalIndent(doc, "", "    ")
	if err != nil {
		return err
	}
	if output == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// TypeMeta names a document's kind, as a Kubernetes object does.
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// DriverStatus is `status -o json|yaml`: inspect.Status under stable names. Strings that are
// empty in the table's "(none)" rows are left out.
type DriverStatus struct {
	TypeMeta    `json:",inline"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	AppID       string `json:"appID,omitempty"`
	RunsAs      string `json:"runsAs,omitempty"`
	Phase       string `json:"phase"`
	Message     string `json:"message,omitempty"`
	Outcome     string `json:"outcome"`
	StatefulSet string `json:"statefulSet,omitempty"`
	Service     string `json:"service,omitempty"`
	// DriverPod and Node describe the current incarnation and its node as the table does.
	DriverPod     string `json:"driverPod,omitempty"`
	Node          string `json:"node,omitempty"`
	Restarts      int    `json:"restarts"`
	TotalRestarts int    `json:"totalRestarts"`
	MaxRestarts   int    `json:"maxRestarts"`
	// RestartWindow is a Go duration ("6h0m0s"); "0s": failures are never forgotten.
	RestartWindow string `json:"restartWindow"`
	// Recoveries is absent when the Events are not visible.
	Recoveries *int   `json:"recoveries,omitempty"`
	Lost       string `json:"lost,omitempty"`
	// NotVisible lists what the apiserver refused to show you: "nodes", "events".
	NotVisible []string `json:"notVisible,omitempty"`
}

func statusDocument(st inspect.Status) DriverStatus {
	d := DriverStatus{
		TypeMeta:  TypeMeta{APIVersion: APIVersion, Kind: "DriverStatus"},
		Namespace: st.Namespace, Name: st.Placeholder, AppID: st.AppID, RunsAs: st.RunsAs,
		Phase: string(st.Phase), Message: st.Message, Outcome: st.Outcome,
		StatefulSet: st.StatefulSet, Service: st.Service, DriverPod: st.Driver, Node: st.Node,
		Restarts: st.Restarts, TotalRestarts: st.TotalRestarts, MaxRestarts: st.MaxRestarts,
		RestartWindow: st.RestartWindow.String(), Lost: st.Lost,
	}
	if d.Phase == "" {
		d.Phase = "Pending"
	}
	if st.NodeNotVisible {
		d.NotVisible = append(d.NotVisible, "nodes")
	}
	if st.EventsNotVisible {
		d.NotVisible = append(d.NotVisible, "events")
	} else {
		d.Recoveries = &st.Recoveries
	}
	return d
}

// DriverList is `list -o json|yaml`.
type DriverList struct {
	TypeMeta `json:",inline"`
	Items    []DriverListItem `json:"items"`
}

// DriverListItem is one row of list.
type DriverListItem struct {
	Namespace     string    `json:"namespace"`
	Name          string    `json:"name"`
	Phase         string    `json:"phase"`
	Outcome       string    `json:"outcome"`
	Restarts      int       `json:"restarts"`
	TotalRestarts int       `json:"totalRestarts"`
	DriverPod     string    `json:"driverPod,omitempty"`
	Node          string    `json:"node,omitempty"`
	Created       time.Time `json:"created"`
}

func listDocument(rows []inspect.Row) DriverList {
	l := DriverList{TypeMeta: TypeMeta{APIVersion: APIVersion, Kind: "DriverList"}, Items: []DriverListItem{}}
	for _, r := range rows {
		phase := string(r.Phase)
		if phase == "" {
			phase = "Pending"
		}
		l.Items = append(l.Items, DriverListItem{Namespace: r.Namespace, Name: r.Name, Phase: phase, Outcome: r.Outcome,
			Restarts: r.Restarts, TotalRestarts: r.TotalRestarts, DriverPod: r.DriverPod, Node: r.Node, Created: r.Created.UTC()})
	}
	return l
}
