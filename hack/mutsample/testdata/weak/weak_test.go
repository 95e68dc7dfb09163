package weak

import "testing"

// TestPasses is deliberately weak: it never tries 50, so `>=` -> `>` lives.
func TestPasses(t *testing.T) {
	if !Passes(80) || Passes(10) {
		t.Error("Passes is wrong")
	}
}

func TestSum(t *testing.T) {
	if got := Sum(4); got != 6 {
		t.Errorf("Sum(4) = %d, want 6", got)
	}
}

func TestGreet(t *testing.T) {
	if got := Greet("x"); got != "hello x" {
		t.Errorf("Greet = %q", got)
	}
}
