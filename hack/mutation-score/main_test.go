package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func parse(t *testing.T, s string) result {
	t.Helper()
	var r result
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestScore: a package's score from gremlins' results, whichever way gremlins named the files,
// and every mutant that lived listed.
func TestScore(t *testing.T) {
	onePackage := parse(t, `{"files":[{"file_name":"run.go","mutations":[
		{"type":"CONDITIONALS_NEGATION","status":"KILLED","line":3,"column":4},
		{"type":"ARITHMETIC_BASE","status":"LIVED","line":9,"column":2},
		{"type":"INCREMENT_DECREMENT","status":"TIMED OUT","line":5,"column":1},
		{"type":"CONDITIONALS_BOUNDARY","status":"NOT COVERED","line":7,"column":1}]}]}`)
	module := parse(t, `{"files":[
		{"file_name":"controller/lifecycle.go","mutations":[{"type":"CONDITIONALS_NEGATION","status":"KILLED","line":80,"column":9}]},
		{"file_name":"convert/pod.go","mutations":[{"type":"CONDITIONALS_NEGATION","status":"NOT VIABLE","line":1,"column":1},
			{"type":"CONDITIONALS_NEGATION","status":"SKIPPED","line":2,"column":1}]}]}`)
	rows := score(map[string]result{"/tmp/x/wrap.json": onePackage, "/tmp/x/changed.json": module})
	want := []row{
		{pkg: "controller", killed: 1},
		{pkg: "convert", notViable: 1},
		{pkg: "wrap", killed: 1, timedOut: 1, lived: 1, notCovered: 1, livedAt: []string{"wrap/run.go:9:2 ARITHMETIC_BASE"}},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v, want %+v", rows, want)
	}
	for i := range want {
		if g, w := rows[i], want[i]; g.pkg != w.pkg || g.killed != w.killed || g.timedOut != w.timedOut || g.lived != w.lived ||
			g.notCovered != w.notCovered || g.notViable != w.notViable || strings.Join(g.livedAt, ";") != strings.Join(w.livedAt, ";") {
			t.Errorf("row %d = %+v, want %+v", i, g, w)
		}
	}
	if e, c := rows[2].efficacy(), rows[2].coverage(); int(e*10) != 666 || c != 75 {
		t.Errorf("wrap: efficacy %.2f, coverage %.2f; want 66.67 (a timeout detects) and 75", e, c)
	}
	var out bytes.Buffer
	if lived := writeReport(&out, rows); !lived || !strings.Contains(out.String(), "LIVED wrap/run.go:9:2 ARITHMETIC_BASE") ||
		!strings.Contains(out.String(), "| controller | 1 | 0 | 0 | 0 | 0 | 100.0 % | 100.0 % |") {
		t.Errorf("print reported lived=%v:\n%s", lived, out.String())
	}
	if writeReport(&bytes.Buffer{}, rows[:2]) {
		t.Error("a run where nothing lived is reported as lived")
	}
}
