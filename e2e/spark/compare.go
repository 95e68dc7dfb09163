package spark

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Difference is one accepted way two runs' calls differ: a call of Actor that only the first
// run makes (B ""), only the second makes (A ""), or that both make under different names.
// It removes the first such call from each sequence before they are compared; with Any, every
// such call (one that depends on timing, such as a poll). With Unordered, A and B must be made
// as often in both runs, wherever (a call from a thread of its own, racing the others).
type Difference struct {
	Actor, A, B    string
	Any, Unordered bool
	Why            string
}

// CompareCalls applies diffs to a's and b's calls and says what still differs, actor by actor
// ("" when they are the same calls in the same order).
func CompareCalls(a, b map[string][]Call, diffs []Difference) string {
	as, bs := callStrings(a), callStrings(b)
	var out strings.Builder
	for _, d := range diffs {
		if d.Unordered {
			na, nb := count(as[d.Actor], d.A), count(bs[d.Actor], d.B)
			if na != nb {
				fmt.Fprintf(&out, "%s: %q made %d times, %q %d times\n", d.Actor, d.A, na, d.B, nb)
			}
		}
		as[d.Actor] = drop(as[d.Actor], d.A, d.Any || d.Unordered)
		bs[d.Actor] = drop(bs[d.Actor], d.B, d.Any || d.Unordered)
	}
	actors := slices.Collect(maps.Keys(as))
	for actor := range bs {
		if !slices.Contains(actors, actor) {
			actors = append(actors, actor)
		}
	}
	slices.Sort(actors)
	for _, actor := range actors {
		if !slices.Equal(as[actor], bs[actor]) {
			fmt.Fprintf(&out, "%s:\n  %q\n  %q\n", actor, as[actor], bs[actor])
		}
	}
	return out.String()
}

func callStrings(calls map[string][]Call) map[string][]string {
	out := map[string][]string{}
	for actor, cs := range calls {
		for _, c := range cs {
			out[actor] = append(out[actor], c.String())
		}
	}
	return out
}

func count(l []string, call string) int {
	n := 0
	for _, c := range l {
		if c == call {
			n++
		}
	}
	return n
}

// drop removes call from l: its first occurrence, or with all every one ("" removes nothing).
func drop(l []string, call string, all bool) []string {
	if call == "" {
		return l
	}
	if all {
		return slices.DeleteFunc(l, func(c string) bool { return c == call })
	}
	if i := slices.Index(l, call); i >= 0 {
		return slices.Delete(l, i, i+1)
	}
	return l
}

// FormatCalls lists calls actor by actor, one call a line.
func FormatCalls(calls map[string][]Call) string {
	var b strings.Builder
	for _, actor := range slices.Sorted(maps.Keys(calls)) {
		fmt.Fprintf(&b, "%s:\n", actor)
		for _, c := range calls[actor] {
			fmt.Fprintf(&b, "  %s\n", c)
		}
	}
	return b.String()
}
