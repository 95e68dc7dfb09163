package main

import (
	"go/ast"
	"go/token"
	"go/types"
)

// A site is one mutant: a token of a source file replaced by another.
type site struct {
	file     string // the file's path, as the caller named it
	line     int
	col      int
	offset   int    // byte offset of the token in the file
	old, new string // the token and what replaces it
	operator string // the class of mutation, gremlins' names
}

// The operators, named as gremlins names them.
const (
	boundary  = "CONDITIONALS_BOUNDARY"
	negation  = "CONDITIONALS_NEGATION"
	logical   = "INVERT_LOGICAL"
	arith     = "ARITHMETIC_BASE"
	incdec    = "INCREMENT_DECREMENT"
	negatives = "INVERT_NEGATIVES"
)

// mutation is what a binary operator may become, and the class of that change.
type mutation struct {
	to       token.Token
	operator string
}

// binaryMutations lists what op may become. Every replacement compiles wherever the original
// does, except `+` on strings, which findSites leaves out by its type, and a constant expression
// that the change makes invalid (a division by a zero constant): such a mutant does not build
// and is reported as not viable.
func binaryMutations(op token.Token) []mutation {
	switch op {
	case token.LSS:
		return []mutation{{token.LEQ, boundary}, {token.GEQ, negation}}
	case token.LEQ:
		return []mutation{{token.LSS, boundary}, {token.GTR, negation}}
	case token.GTR:
		return []mutation{{token.GEQ, boundary}, {token.LEQ, negation}}
	case token.GEQ:
		return []mutation{{token.GTR, boundary}, {token.LSS, negation}}
	case token.EQL:
		return []mutation{{token.NEQ, negation}}
	case token.NEQ:
		return []mutation{{token.EQL, negation}}
	case token.LAND:
		return []mutation{{token.LOR, logical}}
	case token.LOR:
		return []mutation{{token.LAND, logical}}
	case token.ADD:
		return []mutation{{token.SUB, arith}}
	case token.SUB:
		return []mutation{{token.ADD, arith}}
	case token.MUL:
		return []mutation{{token.QUO, arith}}
	case token.QUO, token.REM:
		return []mutation{{token.MUL, arith}}
	}
	return nil
}

// findSites lists every mutant of file, in source order. info gives the types of expressions
// (a string's `+` has no numeric counterpart); nil treats every `+` as numeric.
func findSites(fset *token.FileSet, name string, file *ast.File, info *types.Info) []site {
	var out []site
	at := func(pos token.Pos, old, new token.Token, operator string) {
		p := fset.Position(pos)
		out = append(out, site{file: name, line: p.Line, col: p.Column, offset: p.Offset,
			old: old.String(), new: new.String(), operator: operator})
	}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if n.Op == token.ADD && isString(info, n) {
				return true
			}
			for _, m := range binaryMutations(n.Op) {
				at(n.OpPos, n.Op, m.to, m.operator)
			}
		case *ast.IncDecStmt:
			to := token.DEC
			if n.Tok == token.DEC {
				to = token.INC
			}
			at(n.TokPos, n.Tok, to, incdec)
		case *ast.UnaryExpr:
			if n.Op == token.SUB {
				at(n.OpPos, token.SUB, token.ADD, negatives)
			}
		}
		return true
	})
	return out
}

func isString(info *types.Info, e ast.Expr) bool {
	if info == nil {
		return false
	}
	b, ok := info.TypeOf(e).Underlying().(*types.Basic)
	return ok && b.Info()&types.IsString != 0
}
