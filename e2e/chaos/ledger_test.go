package chaos

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLedger(t *testing.T) {
	now := time.Unix(0, 0)
	for _, tc := range []struct {
		name       string
		do         func(l *Ledger) bool
		violations int
		candidates []string
		withDriver bool
	}{
		{"a process after its predecessor exited", func(l *Ledger) bool {
			l.Start("a", "p0", "n1", now)
			l.End("a", "p0")
			return l.Start("a", "p1", "n2", now)
		}, 0, []string{"n2"}, true},
		{"a process after its predecessor's node died", func(l *Ledger) bool {
			l.Start("a", "p0", "n1", now)
			if got := l.Kill("n1"); !reflect.DeepEqual(got, []string{"a"}) {
				t.Errorf("Kill: apps %v", got)
			}
			return l.Start("a", "p1", "n2", now)
		}, 0, []string{"n2"}, true},
		{"two processes of one app", func(l *Ledger) bool {
			l.Start("a", "p0", "n1", now)
			return l.Start("a", "p1", "n2", now)
		}, 1, []string{"n1", "n2"}, true},
		{"a process after the app's pods were deleted", func(l *Ledger) bool {
			l.Start("a", "p0", "n1", now)
			l.EndApp("a")
			return l.Start("a", "p1", "n2", now)
		}, 0, []string{"n2"}, true},
		{"two apps, one process each", func(l *Ledger) bool {
			l.Start("a", "p0", "n1", now)
			return l.Start("b", "p1", "n1", now)
		}, 0, []string{"n1"}, true},
		{"no process starts on a dead node", func(l *Ledger) bool {
			l.Kill("n1")
			return !l.Start("a", "p0", "n1", now)
		}, 0, []string{"n2"}, false},
		{"a pinned node is not lost", func(l *Ledger) bool {
			l.Start("a", "p0", "n1", now)
			l.Pin("n1")
			return true
		}, 0, []string{"n2"}, false},
		{"an unpinned one is again", func(l *Ledger) bool {
			l.Start("a", "p0", "n1", now)
			l.Pin("n1")
			l.Unpin("n1")
			return true
		}, 0, []string{"n1"}, true},
		{"a removed node is no candidate", func(l *Ledger) bool {
			l.Remove("n1")
			l.AddNode("n3")
			return true
		}, 0, []string{"n2", "n3"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLedger("n1", "n2")
			if !tc.do(l) {
				t.Error("Start answered wrong")
			}
			if v := l.Violations(); len(v) != tc.violations {
				t.Errorf("violations %v, want %d", v, tc.violations)
			} else if len(v) > 0 && !strings.Contains(v[0], "app a") {
				t.Errorf("violation %q does not name the app", v[0])
			}
			if got, driven := l.Candidates(); !reflect.DeepEqual(got, tc.candidates) || driven != tc.withDriver {
				t.Errorf("candidates %v (with a driver: %v), want %v (%v)", got, driven, tc.candidates, tc.withDriver)
			}
		})
	}
}

func TestLedgerAliveCount(t *testing.T) {
	l := NewLedger("n1", "n2", "n3")
	l.Kill("n1")
	l.Remove("n2")
	l.AddNode("n4")
	if got := l.AliveCount(); got != 2 {
		t.Errorf("%d nodes alive, want 2 (n3, n4)", got)
	}
}
