package harness

import (
	"fmt"
	"slices"
)

// Samples are the measured times of one benchmark path, in seconds. A single sample of a path
// whose time swings with a periodic tick (PodGC's 20 s) says little; several give a median that
// moves little and a spread that says how much a change must move to be seen.
type Samples []float64

// Median is the middle sample (the mean of the two middle ones for an even count); 0 for none.
func (s Samples) Median() float64 {
	if len(s) == 0 {
		return 0
	}
	v := slices.Sorted(slices.Values(s))
	m := len(v) / 2
	if len(v)%2 == 1 {
		return v[m]
	}
	return (v[m-1] + v[m]) / 2
}

// Min and Max bound the spread; 0 for none.
func (s Samples) Min() float64 {
	if len(s) == 0 {
		return 0
	}
	return slices.Min(s)
}

func (s Samples) Max() float64 {
	if len(s) == 0 {
		return 0
	}
	return slices.Max(s)
}

// Spread is (max - min) / median: the relative change of the median that the samples cannot
// tell from noise. A regression of 20 % is visible when Spread is below 0.2.
func (s Samples) Spread() float64 {
	m := s.Median()
	if m == 0 {
		return 0
	}
	return (s.Max() - s.Min()) / m
}

// String reads "median s (min–max, n samples)".
func (s Samples) String() string {
	if len(s) == 0 {
		return "no samples"
	}
	return fmt.Sprintf("%.2f s (%.2f–%.2f, n=%d)", s.Median(), s.Min(), s.Max(), len(s))
}

// Ratio is the ratio of the medians of s to its baseline on the same path. A baseline without
// samples is an error, never a ratio left out.
func Ratio(s, baseline Samples) (float64, error) {
	if len(baseline) == 0 || baseline.Median() == 0 {
		return 0, fmt.Errorf("no baseline: the path's baseline has no samples")
	}
	if len(s) == 0 {
		return 0, fmt.Errorf("no samples to divide by the baseline")
	}
	return s.Median() / baseline.Median(), nil
}
