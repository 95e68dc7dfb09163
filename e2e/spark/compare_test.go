package spark

import "testing"

func TestCompareCalls(t *testing.T) {
	call := func(actor, verb, resource, name string) Call {
		return Call{Actor: actor, Verb: verb, Resource: resource, Name: name}
	}
	real := map[string][]Call{
		"submit": {call("submit", "create", "pods", "pi-driver"), call("submit", "patch", "services", "pi-{id}-driver-svc")},
		"pi-driver": {call("pi-driver", "get", "pods", "pi-driver"), call("pi-driver", "list", "pods", ""),
			call("pi-driver", "create", "pods", "job-{id}-exec-{n}"), call("pi-driver", "list", "pods", "")},
	}
	sim := map[string][]Call{
		"submit":    {call("submit", "create", "pods", "pi-driver"), call("submit", "patch", "services", "pi-{id}-driver-svc")},
		"pi-driver": {call("pi-driver", "get", "configmaps", "c"), call("pi-driver", "get", "pods", "pi-driver"), call("pi-driver", "create", "pods", "pi-{id}-exec-{n}")},
	}
	diffs := []Difference{
		{Actor: "pi-driver", B: "get configmaps c", Why: "only the second run"},
		{Actor: "pi-driver", A: "create pods job-{id}-exec-{n}", B: "create pods pi-{id}-exec-{n}", Why: "renamed"},
		{Actor: "pi-driver", A: "list pods", B: "list pods", Any: true, Why: "timing"},
	}
	for _, tc := range []struct {
		name  string
		diffs []Difference
		a, b  map[string][]Call
		same  bool
	}{
		{"the same once the differences are applied", diffs, real, sim, true},
		{"a difference not in the table", diffs[1:], real, sim, false},
		{"a call missing", diffs, real, map[string][]Call{"submit": sim["submit"][:1], "pi-driver": sim["pi-driver"]}, false},
		{"an actor missing", diffs, real, map[string][]Call{"submit": sim["submit"]}, false},
		{"an unordered call anywhere", []Difference{{Actor: "submit", A: "create pods pi-driver", B: "create pods pi-driver", Unordered: true}},
			map[string][]Call{"submit": real["submit"]}, map[string][]Call{"submit": {real["submit"][1], real["submit"][0]}}, true},
		{"an unordered call missing", []Difference{{Actor: "submit", A: "create pods pi-driver", B: "create pods pi-driver", Unordered: true}},
			map[string][]Call{"submit": real["submit"]}, map[string][]Call{"submit": real["submit"][1:]}, false},
		{"the same calls in another order", nil,
			map[string][]Call{"submit": real["submit"]}, map[string][]Call{"submit": {real["submit"][1], real["submit"][0]}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diff := CompareCalls(tc.a, tc.b, tc.diffs)
			if (diff == "") != tc.same {
				t.Errorf("same = %v, want %v:\n%s", diff == "", tc.same, diff)
			}
		})
	}
}
