package main

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// pkg is one package under test: where its files are and every mutant of them.
type pkg struct {
	arg        string            // as given on the command line, e.g. convert
	importPath string            // as the coverage profile names it
	dir        string            // absolute
	sources    map[string][]byte // non-test file name (relative to the module dir) -> content
	sites      []site
}

// goList runs the go command in dir and returns its standard output.
func goList(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// load reads the package arg (a folder below moduleDir) and finds its mutants. It type-checks
// the package against the export data the go command builds for its imports, so that a `+` of
// strings is told from a `+` of numbers exactly.
func load(ctx context.Context, moduleDir, arg string) (*pkg, error) {
	out, err := goList(ctx, moduleDir, "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \",\"}}", "./"+arg)
	if err != nil {
		return nil, err
	}
	fields := strings.Split(strings.TrimSpace(out), "\t")
	if len(fields) != 3 {
		return nil, fmt.Errorf("go list ./%s: unexpected %q", arg, out)
	}
	p := &pkg{arg: arg, importPath: fields[0], dir: fields[1], sources: map[string][]byte{}}
	exports, err := exportData(ctx, moduleDir, arg)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	names := strings.Split(fields[2], ",")
	sort.Strings(names)
	for _, base := range names {
		src, err := os.ReadFile(filepath.Join(p.dir, base))
		if err != nil {
			return nil, err
		}
		name := filepath.ToSlash(filepath.Join(arg, base))
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		p.sources[name] = src
		files = append(files, f)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	lookup := func(path string) (io.ReadCloser, error) {
		if f, ok := exports[path]; ok {
			return os.Open(f)
		}
		return nil, fmt.Errorf("no export data for %s", path)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	if _, err := conf.Check(p.importPath, fset, files, info); err != nil {
		return nil, fmt.Errorf("type-check %s: %v", arg, err)
	}
	for _, f := range files {
		p.sites = append(p.sites, findSites(fset, fset.Position(f.Package).Filename, f, info)...)
	}
	return p, nil
}

// exportData maps each import path the package depends on to its export data file, which the
// go command builds (from its cache, mostly) for `go list -export`.
func exportData(ctx context.Context, moduleDir, arg string) (map[string]string, error) {
	out, err := goList(ctx, moduleDir, "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", "./"+arg)
	if err != nil {
		return nil, err
	}
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if path, file, ok := strings.Cut(line, "\t"); ok && file != "" {
			exports[path] = file
		}
	}
	return exports, nil
}
