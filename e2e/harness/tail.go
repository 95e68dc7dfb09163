package harness

import (
	"math/rand/v2"
	"slices"
	"time"
)

// Phases are the latencies of one kind of request in a latency benchmark, phase by phase: each
// phase a second or so of requests of that kind alone.
type Phases [][]time.Duration

// All is every latency of p, in phase order.
func (p Phases) All() []time.Duration { return slices.Concat(p...) }

// Len is how many latencies p holds.
func (p Phases) Len() int {
	n := 0
	for _, phase := range p {
		n += len(phase)
	}
	return n
}

// Quantile is the q-quantile of d by nearest rank; 0 for none.
func Quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(d))
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// AddedInterval is the central level interval (0.90: from the 5th to the 95th percentile) of
// what with adds to without at quantile q, Quantile(with) - Quantile(without), over n resamples:
// each draws as many phases as each side has, with replacement, and takes the quantile of their
// latencies together.
//
// Why phases, not single requests: the slow requests of a run come in bursts (a collection in the
// apiserver, a busy moment of the host) that slow a whole phase, so single requests are not
// independent draws; resampling them one by one would give an interval far narrower than the
// run-to-run spread it is meant to show. Phases of a kind are spread over the run in a random
// order, so they are close to independent.
func AddedInterval(with, without Phases, q, level float64, n int, rng *rand.Rand) (lo, hi time.Duration) {
	if len(with) == 0 || len(without) == 0 || n <= 0 {
		return 0, 0
	}
	added := make([]time.Duration, n)
	for i := range added {
		added[i] = Quantile(resample(with, rng), q) - Quantile(resample(without, rng), q)
	}
	tail := (1 - level) / 2
	return Quantile(added, tail), Quantile(added, 1-tail)
}

// resample draws len(p) phases of p with replacement, and returns their latencies together.
func resample(p Phases, rng *rand.Rand) []time.Duration {
	var d []time.Duration
	for range p {
		d = append(d, p[rng.IntN(len(p))]...)
	}
	return d
}

// TailPositions counts the latencies of p over its q-quantile by where they came in their phase:
// the count at i is how many were the (i+1)th of theirs. A tail spread over the phase is the load;
// one piled at the start is what the path does after the other kinds' phases, when it is cold.
func TailPositions(p Phases, q float64) []int {
	over := Quantile(p.All(), q)
	var at []int
	for _, phase := range p {
		for i, d := range phase {
			if d <= over {
				continue
			}
			if i >= len(at) {
				at = append(at, make([]int, i+1-len(at))...)
			}
			at[i]++
		}
	}
	return at
}
