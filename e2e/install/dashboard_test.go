//go:build testbed

package install

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// metricSelector finds each metric of driverset's dashboard in a PromQL expression, with its
// label matchers when it has any.
var metricSelector = regexp.MustCompile(`\b(driverset_[a-z_]+|leader_election_master_status|controller_runtime_[a-z_]+|kube_[a-z_]+)\b(\{[^}]*\})?`)

// The dashboard picks one driverset among several: template variables cluster, namespace and job
// (from driverset_build_info, each narrowing the next, all of them by default), and every query
// of every panel selects by all three, so no panel mixes clusters the viewer did not choose.
func TestDashboardSelectsClusterNamespaceAndJob(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), monitoringDir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Query      any    `json:"query"`
				IncludeAll bool   `json:"includeAll"`
				AllValue   string `json:"allValue"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	vars := map[string]bool{}
	for _, v := range dash.Templating.List {
		if v.Type == "query" {
			// All: ".*", which also matches a series without the label (one cluster, no cluster label).
			if !v.IncludeAll || v.AllValue != ".*" {
				t.Errorf("variable %s: includeAll %v, allValue %q; want All as .*", v.Name, v.IncludeAll, v.AllValue)
			}
			vars[v.Name] = true
		}
	}
	for _, name := range []string{"cluster", "namespace", "job"} {
		if !vars[name] {
			t.Errorf("no query variable %s", name)
		}
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`cluster=~"\$cluster"`),
		regexp.MustCompile(`namespace=~"\$namespace"`),
		regexp.MustCompile(`job=~"\$job"`),
	}
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			sels := metricSelector.FindAllStringSubmatch(target.Expr, -1)
			if len(sels) == 0 {
				t.Errorf("%s: no metric found in %q", p.Title, target.Expr)
			}
			for _, sel := range sels {
				for _, w := range want {
					if !w.MatchString(sel[2]) {
						t.Errorf("%s: %s%s does not select %s", p.Title, sel[1], sel[2], w)
					}
				}
			}
		}
	}
}
