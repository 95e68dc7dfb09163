package main

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// watchNamespaces parses --watch-namespaces: the namespaces of a namespaced install, sorted and
// without repeats; nil (the flag empty) is the cluster-wide install. A malformed name is an error
// rather than a namespace that silently never matches.
func watchNamespaces(flag string) ([]string, error) {
	return namespaceList("--watch-namespaces", flag)
}

// namespaceList reads a comma-separated list of namespace names given to the flag name, sorted
// and without repeats; "" is none.
func namespaceList(name, flag string) ([]string, error) {
	if strings.TrimSpace(flag) == "" {
		return nil, nil
	}
	seen := map[string]bool{}
	var out []string
	for _, n := range strings.Split(flag, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			return nil, fmt.Errorf("%s %q: empty namespace", name, flag)
		}
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			return nil, fmt.Errorf("%s: %q is not a namespace name: %s", name, n, strings.Join(errs, "; "))
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// watched restricts a cache to the watched namespaces (none: every namespace). Cluster-scoped
// kinds (Nodes) stay cluster-wide: controller-runtime applies DefaultNamespaces to namespaced
// kinds only. In a namespaced install this is what keeps driverset within its Roles: an informer
// on any other namespace would be refused, and the cache would never sync.
func watched(o cache.Options, namespaces []string) cache.Options {
	if len(namespaces) == 0 {
		return o
	}
	o.DefaultNamespaces = make(map[string]cache.Config, len(namespaces))
	for _, n := range namespaces {
		o.DefaultNamespaces[n] = cache.Config{}
	}
	return o
}
