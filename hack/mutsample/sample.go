package main

import (
	"hash/fnv"
	"math/rand/v2"
	"path"
	"sort"
)

// coveredSites keeps the sites on lines that the package's own tests run (covered is keyed by
// import path/file.go, as in the coverage profile).
func coveredSites(sites []site, importPath string, covered map[string]map[int]bool) []site {
	var out []site
	for _, s := range sites {
		if covered[path.Join(importPath, path.Base(s.file))][s.line] {
			out = append(out, s)
		}
	}
	return out
}

// sample draws n of sites without replacement, the same n for the same seed, package and
// sites: each package has its own stream (seeded by seed and its name), so a run over fewer
// packages draws the same mutants of each. The result is in source order.
func sample(sites []site, n int, seed uint64, pkgName string) []site {
	h := fnv.New64a()
	h.Write([]byte(pkgName))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	drawn := append([]site(nil), sites...)
	rng.Shuffle(len(drawn), func(i, j int) { drawn[i], drawn[j] = drawn[j], drawn[i] })
	if n < len(drawn) {
		drawn = drawn[:n]
	}
	sort.SliceStable(drawn, func(i, j int) bool {
		a, b := drawn[i], drawn[j]
		if a.file != b.file {
			return a.file < b.file
		}
		if a.offset != b.offset {
			return a.offset < b.offset
		}
		return a.new < b.new
	})
	return drawn
}
