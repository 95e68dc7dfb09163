// Command mutsample is driverset's mutation sampling: for each package it lists every mutant
// of its non-test files (the classic operators: conditionals boundary and negation, logical
// and/or, arithmetic, increment/decrement, inverted negatives), keeps those on lines the
// package's own tests run, draws a seeded random sample of them and runs the package's tests
// against each (its test binary built with `go test -c -overlay`, then run with a timeout). It
// prints every mutant that lived and a score per package with its 95% interval; it exits 1 when
// a mutant lived, 2 on an error.
//
// Usage: go run ./hack/mutsample [-n 10] [-seed S] [-workers 2] [-timeout-factor 10] [-min-timeout 30s] [-C dir] PKG...
//
// PKG is a folder below the module (convert). The same seed and code draw the same mutants.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// config is one run's settings.
type config struct {
	moduleDir     string
	pkgs          []string
	n             int           // mutants sampled per package
	seed          uint64        // of the sample
	workers       int           // go test runs at once
	timeoutFactor float64       // a mutant's timeout, in multiples of its package's test run
	minTimeout    time.Duration // and never less than this
	progress      io.Writer
}

func main() {
	var cfg config
	seed := flag.String("seed", "", "seed of the sample (default: a random one, printed)")
	flag.IntVar(&cfg.n, "n", 10, "mutants sampled per package")
	flag.IntVar(&cfg.workers, "workers", 2, "mutants tested at once")
	flag.Float64Var(&cfg.timeoutFactor, "timeout-factor", 10, "a mutant's tests time out after this many times its package's measured test run")
	flag.DurationVar(&cfg.minTimeout, "min-timeout", 30*time.Second, "and never sooner than this")
	flag.StringVar(&cfg.moduleDir, "C", ".", "the module's folder")
	flag.Parse()
	cfg.pkgs = flag.Args()
	cfg.seed = rand.Uint64() % 1_000_000
	if *seed != "" {
		s, err := strconv.ParseUint(*seed, 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "seed:", err)
			os.Exit(2)
		}
		cfg.seed = s
	}
	if len(cfg.pkgs) == 0 || cfg.n < 1 || cfg.workers < 1 || cfg.timeoutFactor <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	cfg.progress = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	anyLived, err := mutateAll(ctx, cfg, os.Stdout)
	stop()
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	case anyLived:
		os.Exit(1)
	}
}

// mutateAll samples and tests the mutants of cfg.pkgs, writes the report to w and reports
// whether a mutant lived.
func mutateAll(ctx context.Context, cfg config, w io.Writer) (bool, error) {
	start := time.Now()
	fmt.Fprintf(w, "seed %d (SEED=%d replays this sample), %d mutants per package, %d workers\n",
		cfg.seed, cfg.seed, cfg.n, cfg.workers)
	moduleDir, err := filepath.Abs(cfg.moduleDir)
	if err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp("", "mutsample")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)

	pkgs := make([]*pkg, len(cfg.pkgs))
	rows := make([]row, len(cfg.pkgs))
	for i, arg := range cfg.pkgs {
		if pkgs[i], err = load(ctx, moduleDir, arg); err != nil {
			return false, err
		}
		rows[i] = row{pkg: arg, sites: len(pkgs[i].sites)}
	}

	// One coverage run per package: which lines its tests run, and how long the tests take
	// (the run alone, not the build, which a loaded machine slows most).
	covered := make([][]site, len(pkgs))
	err = forEach(ctx, cfg.workers, len(pkgs), func(i int) error {
		bin := filepath.Join(tmp, fmt.Sprintf("cover%d.test", i))
		profile := filepath.Join(tmp, fmt.Sprintf("cover%d.out", i))
		r := buildTest(ctx, moduleDir, pkgs[i], bin, "-cover")
		if r.err == nil {
			r = command(ctx, pkgs[i].dir, 0, bin, "-test.coverprofile="+profile)
		}
		if r.err != nil {
			return fmt.Errorf("the tests of %s fail without a mutant: %v\n%s", pkgs[i].arg, r.err, r.output)
		}
		b, err := os.ReadFile(profile)
		if err != nil {
			return err
		}
		lines, err := coveredLines(bytes.NewReader(b))
		if err != nil {
			return err
		}
		covered[i] = coveredSites(pkgs[i].sites, pkgs[i].importPath, lines)
		rows[i].covered, rows[i].testTime = len(covered[i]), r.took
		fmt.Fprintf(cfg.progress, "%s: %d mutants, %d on covered lines, tests %.1f s\n",
			pkgs[i].arg, len(pkgs[i].sites), len(covered[i]), r.took.Seconds())
		return nil
	})
	if err != nil {
		return false, err
	}

	type job struct {
		pkg  int
		site site
	}
	var jobs []job
	for i := range pkgs {
		drawn := sample(covered[i], cfg.n, cfg.seed, pkgs[i].arg)
		rows[i].sampled = len(drawn)
		for _, s := range drawn {
			jobs = append(jobs, job{i, s})
		}
	}
	outcomes := make([]outcome, len(jobs))
	var mu sync.Mutex // guards the progress count and writer
	done := 0
	err = forEach(ctx, cfg.workers, len(jobs), func(j int) error {
		jb := jobs[j]
		timeout := max(time.Duration(cfg.timeoutFactor*float64(rows[jb.pkg].testTime)), cfg.minTimeout)
		st, err := runMutant(ctx, moduleDir, tmp, pkgs[jb.pkg], jb.site, timeout)
		if err != nil {
			return err
		}
		outcomes[j] = outcome{site: jb.site, status: st}
		mu.Lock()
		done++
		fmt.Fprintf(cfg.progress, "[%d/%d] %s %s:%d %s -> %s\n", done, len(jobs), st, jb.site.file, jb.site.line, jb.site.old, jb.site.new)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return false, err
	}
	for j, o := range outcomes {
		r := &rows[jobs[j].pkg]
		switch o.status {
		case killed:
			r.killed++
		case timedOut:
			r.timedOut++
		case lived:
			r.lived++
		case notViable:
			r.notViable++
		}
	}
	return writeReport(w, rows, outcomes, time.Since(start)), nil
}

// forEach calls f(0) … f(n-1), at most workers at once, and returns the first error; after an
// error it starts no more calls.
func forEach(ctx context.Context, workers, n int, f func(int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					cancel(err)
				}
			}
		})
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}
