package harness

import (
	"bufio"
	"strconv"
	"strings"
)

// HistogramTotals adds up the _sum and _count series of histogram name in text (Prometheus' text
// format) over the series whose labels contain every one of match (each `key="value"`): what a
// mean over a window needs, read before and after it.
func HistogramTotals(text, name string, match ...string) (sum, count float64) {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		var total *float64
		switch {
		case strings.HasPrefix(line, name+"_sum{"), strings.HasPrefix(line, name+"_sum "):
			total = &sum
		case strings.HasPrefix(line, name+"_count{"), strings.HasPrefix(line, name+"_count "):
			total = &count
		default:
			continue
		}
		if !containsAll(line, match) {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			*total += v
		}
	}
	return sum, count
}

func containsAll(line string, match []string) bool {
	labels := line[:max(strings.LastIndexByte(line, '}'), 0)]
	for _, m := range match {
		if !strings.Contains(labels, m) {
			return false
		}
	}
	return true
}

// Gauge is the value of the unlabelled series name in text (Prometheus' text format), 0 when
// absent.
func Gauge(text, name string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}
