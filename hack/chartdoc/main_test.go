package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The committed chart README is what chartdoc makes of the committed values.yaml: a value added,
// renamed or re-commented without `go run ./hack/chartdoc` fails here.
func TestChartREADMEIsGenerated(t *testing.T) {
	chart := filepath.Join("..", "..", "charts", "driverset")
	want, err := generate(chart)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(chart, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("charts/driverset/README.md is not generated from values.yaml: run `go run ./hack/chartdoc`")
	}
}

func TestValuesTable(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		want         []string
	}{
		{
			name:   "a commented scalar, its comment on one line",
			values: "# Every replica serves.\n# Keep 2.\nreplicas: 2\n",
			want:   []string{"| `replicas` | `2` | Every replica serves. Keep 2. |"},
		},
		{
			name:   "a group: its comment, then each key by its path",
			values: "# Bounds.\nfencing:\n  # Never when empty.\n  fenceAfter: \"\"\n  namespaces: []\n",
			want:   []string{"| `fencing` | | Bounds. |", "| `fencing.fenceAfter` | `\"\"` | Never when empty. |", "| `fencing.namespaces` | `[]` |  |"},
		},
		{
			name:   "an object given whole (no comments, no scalars inside) is one value",
			values: "affinity:\n  podAntiAffinity:\n    required: [a]\n",
			want:   []string{"| `affinity` | `{\"podAntiAffinity\":{\"required\":[\"a\"]}}` |  |"},
		},
		{
			name:   "a pipe is escaped in a cell",
			values: "# a | b\nx: \"c|d\"\n",
			want:   []string{"| `x` | `\"c\\|d\"` | a \\| b |"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := valuesTable([]byte(tc.values))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(got), "\n")[2:]
			if strings.Join(lines, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("table rows:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestSplice(t *testing.T) {
	got, err := splice("intro\n"+begin+"\nold\n"+end+"\nafter\n", "new\n")
	if err != nil || got != "intro\n"+begin+"\nnew\n"+end+"\nafter\n" {
		t.Errorf("splice = %q, %v", got, err)
	}
	if _, err := splice("no markers", "x"); err == nil {
		t.Error("a README without the markers was accepted")
	}
}
