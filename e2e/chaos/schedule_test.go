package chaos

import (
	"reflect"
	"testing"
	"time"
)

// A failing run is replayed from its seed alone: the same seed gives the same schedule, and
// another seed another one.
func TestPlanIsAPureFunctionOfTheSeed(t *testing.T) {
	for _, size := range Sizes() {
		a, b := Plan(42, size), Plan(42, size)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: seed 42 gave two different schedules", size.Name)
		}
		if c := Plan(43, size); reflect.DeepEqual(a.Apps, c.Apps) || reflect.DeepEqual(a.Control, c.Control) {
			t.Errorf("%s: seeds 42 and 43 gave the same schedule", size.Name)
		}
	}
}

// The sizes hold what the issue asks: the long run at least 100 node losses and 100 leader kills
// over at least 200 apps; both sizes every kind of fault at least once.
func TestSizesHoldEveryFault(t *testing.T) {
	for seed := range uint64(20) {
		for _, size := range Sizes() {
			s := Plan(seed, size)
			if len(s.Apps) != size.Apps {
				t.Errorf("%s: %d apps, want %d", size.Name, len(s.Apps), size.Apps)
			}
			for k := LeaderKill; k <= SilentDeath; k++ {
				if s.Count(k) == 0 {
					t.Errorf("%s, seed %d: no %s", size.Name, seed, k)
				}
			}
			losses := 0
			for _, k := range NodeLossKinds() {
				losses += s.Count(k)
			}
			if losses != size.NodeLosses || s.Count(LeaderKill) != size.LeaderKills {
				t.Errorf("%s: %d node losses and %d leader kills, want %d and %d", size.Name, losses, s.Count(LeaderKill), size.NodeLosses, size.LeaderKills)
			}
			for _, f := range append(append([]Fault{}, s.Control...), s.Nodes...) {
				if f.Gap < size.MinGap || f.Gap > size.MaxGap {
					t.Errorf("%s: gap %s outside [%s, %s]", size.Name, f.Gap, size.MinGap, size.MaxGap)
				}
			}
			for _, f := range s.Nodes {
				if !f.Kind.IsNodeLoss() {
					t.Errorf("%s: %s in the node lane", size.Name, f.Kind)
				}
			}
			for _, f := range s.Control {
				if f.Kind.IsNodeLoss() {
					t.Errorf("%s: %s in the control lane", size.Name, f.Kind)
				}
			}
		}
	}
	long := Sizes()["long"]
	if long.Apps < 200 || long.NodeLosses < 100 || long.LeaderKills < 100 {
		t.Errorf("the long run is smaller than the issue asks: %+v", long)
	}
}

// Every app's exits are a story driverset can finish: they end with 0, or with exactly one more
// failure than the restarts allowed; each incarnation has its executors and life.
func TestAppsEndAsTheirBudgetSays(t *testing.T) {
	s := Plan(7, Sizes()["long"])
	codes, fencings := map[bool]int{}, map[Fencing]int{}
	for _, a := range s.Apps {
		n := len(a.Exits)
		if len(a.Executors) != n || len(a.Life) != n {
			t.Fatalf("%s: %d exits, %d executor counts, %d lives", a.Name, n, len(a.Executors), len(a.Life))
		}
		for i, c := range a.Exits {
			if (c == 0) != (i == n-1 && a.Want().Succeeded) || c < 0 || c > 255 {
				t.Errorf("%s: exit %d is %d (exits %v)", a.Name, i, c, a.Exits)
			}
			codes[c == 0]++
		}
		if !a.Want().Succeeded && n != a.MaxRestarts+1 {
			t.Errorf("%s: fails after %d exits with max-restarts %d", a.Name, n, a.MaxRestarts)
		}
		if a.Want().Succeeded && n > a.MaxRestarts+1 {
			t.Errorf("%s: succeeds after %d exits, more than max-restarts %d allows", a.Name, n, a.MaxRestarts)
		}
		fencings[a.Fencing]++
		for _, l := range a.Life {
			if l < time.Second || l > 6*time.Second {
				t.Errorf("%s: life %s", a.Name, l)
			}
		}
	}
	if codes[true] == 0 || codes[false] == 0 || len(fencings) != 3 {
		t.Errorf("the long run lacks variety: exits 0/non-zero %v, fencing %v", codes, fencings)
	}
}

func TestWant(t *testing.T) {
	for _, tc := range []struct {
		exits []int32
		max   int
		want  Want
	}{
		{[]int32{0}, 0, Want{Succeeded: true}},
		{[]int32{3, 0}, 3, Want{Succeeded: true, Restarts: 1}},
		{[]int32{9}, 0, Want{Restarts: 0, LastExit: 9}},
		// The failure that finds no restart left is not counted as one.
		{[]int32{1, 2, 255}, 2, Want{Restarts: 2, LastExit: 255}},
	} {
		if got := (App{Exits: tc.exits, MaxRestarts: tc.max}).Want(); got != tc.want {
			t.Errorf("exits %v, max-restarts %d: %+v, want %+v", tc.exits, tc.max, got, tc.want)
		}
	}
}
