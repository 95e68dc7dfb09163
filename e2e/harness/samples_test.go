package harness

import (
	"math"
	"testing"
)

func TestSamples(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		s                      Samples
		median, lo, hi, spread float64
	}{
		{"none", nil, 0, 0, 0, 0},
		{"one", Samples{4}, 4, 4, 4, 0},
		{"odd count: the middle one, whatever the order", Samples{9, 1, 5}, 5, 1, 9, 1.6},
		{"even count: the mean of the two middle ones", Samples{4, 1, 3, 2}, 2.5, 1, 4, 1.2},
		{"an outlier moves the spread, not the median", Samples{10, 10, 100}, 10, 10, 100, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := []float64{tc.s.Median(), tc.s.Min(), tc.s.Max(), tc.s.Spread()}
			want := []float64{tc.median, tc.lo, tc.hi, tc.spread}
			for i, what := range []string{"median", "min", "max", "spread"} {
				if math.Abs(got[i]-want[i]) > 1e-9 {
					t.Errorf("%s of %v = %v, want %v", what, tc.s, got[i], want[i])
				}
			}
		})
	}
}

func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		name        string
		s, baseline Samples
		want        float64
		fails       bool
	}{
		{"ratio of the medians", Samples{1, 2, 30}, Samples{4, 4, 1}, 0.5, false},
		{"a missing baseline fails", Samples{1}, nil, 0, true},
		{"a baseline of zero fails", Samples{1}, Samples{0}, 0, true},
		{"nothing measured fails", nil, Samples{1}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Ratio(tc.s, tc.baseline)
			if (err != nil) != tc.fails {
				t.Fatalf("Ratio(%v, %v) error %v, want failure %v", tc.s, tc.baseline, err, tc.fails)
			}
			if math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("Ratio(%v, %v) = %v, want %v", tc.s, tc.baseline, got, tc.want)
			}
		})
	}
}
