// Package weak is mutsample's fixture: its test leaves exactly one mutant alive.
package weak

// Passes tells whether a score passes; 50 does.
func Passes(score int) bool {
	return score >= 50
}

// Sum adds 0 … n-1.
func Sum(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i
	}
	return s
}

// Greet has a `+` of strings, which has no mutant.
func Greet(name string) string {
	return "hello " + name
}

// Untested has mutants on lines no test runs, which are never drawn.
func Untested(a, b int) bool {
	return a < b && -a != b
}
