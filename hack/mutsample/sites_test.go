package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"strings"
	"testing"
)

// sitesOf type-checks body as the body of func f(a, b int, s string, ok bool) any (line 4 of
// its file) and lists its mutants as "column old to new OPERATOR", in the order found.
func sitesOf(t *testing.T, body string) []string {
	t.Helper()
	src := "package p\n\nfunc f(a, b int, s string, ok bool) any {\n" + body + "\n}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	if _, err := (&types.Config{}).Check("p", fset, []*ast.File{f}, info); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range findSites(fset, "p.go", f, info) {
		if got := src[s.offset : s.offset+len(s.old)]; got != s.old || s.line != 4 {
			t.Errorf("%d:%d: offset points at %q, not %q", s.line, s.col, got, s.old)
		}
		out = append(out, fmt.Sprintf("%d %s to %s %s", s.col, s.old, s.new, s.operator))
	}
	return out
}

// TestFindSites is the list of mutations: what each operator may become, and what has none.
func TestFindSites(t *testing.T) {
	for _, tc := range []struct {
		name, body string // of func f(a, b int, s string, ok bool) any
		want       []string
	}{
		{"less", "return a < b", []string{"10 < to <= CONDITIONALS_BOUNDARY", "10 < to >= CONDITIONALS_NEGATION"}},
		{"less or equal", "return a <= b", []string{"10 <= to < CONDITIONALS_BOUNDARY", "10 <= to > CONDITIONALS_NEGATION"}},
		{"greater", "return a > b", []string{"10 > to >= CONDITIONALS_BOUNDARY", "10 > to <= CONDITIONALS_NEGATION"}},
		{"greater or equal", "return a >= b", []string{"10 >= to > CONDITIONALS_BOUNDARY", "10 >= to < CONDITIONALS_NEGATION"}},
		{"equal", "return a == b", []string{"10 == to != CONDITIONALS_NEGATION"}},
		{"not equal", "return s != \"\"", []string{"10 != to == CONDITIONALS_NEGATION"}},
		{"and, outer first", "return ok && a == 0", []string{"11 && to || INVERT_LOGICAL", "16 == to != CONDITIONALS_NEGATION"}},
		{"or", "return ok || ok", []string{"11 || to && INVERT_LOGICAL"}},
		{"plus of numbers", "return a + b", []string{"10 + to - ARITHMETIC_BASE"}},
		{"plus of strings has none", "return s + \"x\"", nil},
		{"minus", "return a - b", []string{"10 - to + ARITHMETIC_BASE"}},
		{"times", "return a * b", []string{"10 * to / ARITHMETIC_BASE"}},
		{"divide", "return a / b", []string{"10 / to * ARITHMETIC_BASE"}},
		{"remainder", "return a % b", []string{"10 % to * ARITHMETIC_BASE"}},
		{"increment", "a++; return a", []string{"2 ++ to -- INCREMENT_DECREMENT"}},
		{"decrement", "a--; return a", []string{"2 -- to ++ INCREMENT_DECREMENT"}},
		{"negative", "return -a", []string{"8 - to + INVERT_NEGATIVES"}},
		{"not, address, deref, bitwise, shift and assignment ops have none", "a += b; a <<= 1; p := &a; return !ok && *p&1 == 0", []string{
			"38 && to || INVERT_LOGICAL", "46 == to != CONDITIONALS_NEGATION"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sitesOf(t, tc.body)
			if strings.Join(got, "; ") != strings.Join(tc.want, "; ") {
				t.Errorf("sites of %q:\n got  %q\n want %q", tc.body, got, tc.want)
			}
		})
	}
}

// TestMutate: the token at the site is replaced, and a site that does not point at its token
// is refused rather than applied somewhere else.
func TestMutate(t *testing.T) {
	src := []byte("return a <= b")
	got, err := mutate(src, site{offset: 9, old: "<=", new: "<"})
	if err != nil || string(got) != "return a < b" {
		t.Errorf("mutate = %q, %v; want %q", got, err, "return a < b")
	}
	if _, err := mutate(src, site{offset: 8, old: "<=", new: "<"}); err == nil {
		t.Error("a site off its token was applied")
	}
	if _, err := mutate(src, site{offset: 12, old: "<=", new: "<"}); err == nil {
		t.Error("a site past the end was applied")
	}
}
