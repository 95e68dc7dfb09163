package harness

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// phases makes n phases of size creates each, every create taking d.
func phases(n, size int, d time.Duration) Phases {
	p := make(Phases, n)
	for i := range p {
		p[i] = make([]time.Duration, size)
		for j := range p[i] {
			p[i][j] = d
		}
	}
	return p
}

func TestQuantile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Millisecond
		}
		return d
	}
	for _, tc := range []struct {
		name string
		d    []time.Duration
		q    float64
		want time.Duration
	}{
		{"none is 0", nil, 0.99, 0},
		{"one is itself", ms(7), 0.99, 7 * time.Millisecond},
		{"nearest rank, whatever the order", ms(5, 1, 4, 2, 3), 0.5, 3 * time.Millisecond},
		{"p99 of 100 is the 99th", append(ms(make([]int, 98)...), ms(10, 20)...), 0.99, 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Quantile(tc.d, tc.q); got != tc.want {
				t.Errorf("Quantile(%v, %v) = %v, want %v", tc.d, tc.q, got, tc.want)
			}
		})
	}
}

func TestAddedInterval(t *testing.T) {
	const ms = time.Millisecond
	// one bad phase: 19 of 5 ms and one whose 50 creates all took 50 ms (5 % of the creates).
	oneBad := phases(19, 50, 5*ms)
	oneBad = append(oneBad, phases(1, 50, 50*ms)...)
	for _, tc := range []struct {
		name          string
		with, without Phases
		lo, hi        time.Duration
	}{
		{"the same times add nothing", phases(20, 50, 5*ms), phases(20, 50, 5*ms), 0, 0},
		{"a steady shift is the shift, however drawn", phases(20, 50, 8*ms), phases(20, 50, 5*ms), 3 * ms, 3 * ms},
		{"less is a negative shift", phases(20, 50, 4*ms), phases(20, 50, 5*ms), -ms, -ms},
		// A draw of 20 phases leaves the bad one out about a third of the time ((19/20)^20), so
		// the interval runs from nothing added to all of it. Drawing creates one by one would
		// nearly always keep more than 1 % of them bad and give [45, 45]: tail events come in
		// bursts, a phase at a time, and an interval that ignores that is too narrow.
		{"a burst in one phase is resampled whole", oneBad, phases(20, 50, 5*ms), 0, 45 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi := AddedInterval(tc.with, tc.without, 0.99, 0.90, 2000, rand.New(rand.NewPCG(1, 2)))
			if lo != tc.lo || hi != tc.hi {
				t.Errorf("90%% interval of the p99 added = [%v, %v], want [%v, %v]", lo, hi, tc.lo, tc.hi)
			}
		})
	}
}

func TestPhasesAll(t *testing.T) {
	p := Phases{{1, 2}, {3}, nil, {4}}
	got := p.All()
	if len(got) != 4 || got[0] != 1 || got[3] != 4 {
		t.Errorf("All() = %v, want [1 2 3 4]", got)
	}
	if p.Len() != 4 {
		t.Errorf("Len() = %d, want 4", p.Len())
	}
}

func TestTailPositions(t *testing.T) {
	const ms = time.Millisecond
	cold := phases(10, 10, ms)
	for i := range cold {
		cold[i][0] = 9 * ms // each phase's first create is slow
	}
	cold[3][7] = 20 * ms // and one in the middle of one phase slower still
	got := TailPositions(cold, 0.90)
	// p90 of the 100 is 9 ms: only the one over it counts, at position 8.
	if want := []int{0, 0, 0, 0, 0, 0, 0, 1}; !slices.Equal(got, want) {
		t.Errorf("TailPositions at p90 = %v, want %v", got, want)
	}
	got = TailPositions(cold, 0.80)
	// p80 is 1 ms: the ten first creates and the slow one are over it.
	if want := []int{10, 0, 0, 0, 0, 0, 0, 1}; !slices.Equal(got, want) {
		t.Errorf("TailPositions at p80 = %v, want %v", got, want)
	}
}
