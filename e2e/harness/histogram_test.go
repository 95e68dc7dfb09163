package harness

import "testing"

func TestHistogramTotals(t *testing.T) {
	text := `# HELP x_seconds a histogram
x_seconds_bucket{le="1",webhook="/a"} 3
x_seconds_sum{webhook="/a",code="200"} 1.5
x_seconds_count{webhook="/a",code="200"} 3
x_seconds_sum{webhook="/a",code="500"} 0.5
x_seconds_count{webhook="/a",code="500"} 1
x_seconds_sum{webhook="/b"} 9
x_seconds_count{webhook="/b"} 9
x_seconds_extra_sum{webhook="/a"} 100
y_sum 7
`
	for _, tc := range []struct {
		name       string
		metric     string
		match      []string
		sum, count float64
	}{
		{"every series of one webhook", "x_seconds", []string{`webhook="/a"`}, 2, 4},
		{"two labels", "x_seconds", []string{`webhook="/a"`, `code="500"`}, 0.5, 1},
		{"no match", "x_seconds", []string{`webhook="/c"`}, 0, 0},
		{"no labels at all", "y", nil, 7, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum, count := HistogramTotals(text, tc.metric, tc.match...)
			if sum != tc.sum || count != tc.count {
				t.Errorf("got sum %v count %v, want %v %v", sum, count, tc.sum, tc.count)
			}
		})
	}
}

func TestGauge(t *testing.T) {
	text := "# HELP g a gauge\ng_total 9\ng 2.5\ng{a=\"b\"} 7\n"
	if got := Gauge(text, "g"); got != 2.5 {
		t.Errorf("Gauge(g) = %v, want 2.5 (not the labelled series, not g_total)", got)
	}
	if got := Gauge(text, "absent"); got != 0 {
		t.Errorf("Gauge(absent) = %v, want 0", got)
	}
}
