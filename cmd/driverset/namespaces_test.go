package main

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/driverset/driverset/controller"
)

// --watch-namespaces is the namespaced install: the namespaces it names, and no other, are
// watched. Empty is the cluster-wide install.
func TestWatchNamespaces(t *testing.T) {
	for _, tc := range []struct {
		flag    string
		want    []string // nil: every namespace
		wantErr string
	}{
		{flag: "", want: nil},
		{flag: "spark-a", want: []string{"spark-a"}},
		{flag: "spark-a,spark-b", want: []string{"spark-a", "spark-b"}},
		{flag: "spark-b, spark-a ,spark-b", want: []string{"spark-a", "spark-b"}},
		{flag: "spark-a,,spark-b", wantErr: "empty namespace"},
		{flag: "Spark_A", wantErr: `"Spark_A"`},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			got, err := watchNamespaces(tc.flag)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestServeFlagsWatchNamespaces(t *testing.T) {
	f, err := parseServeFlags([]string{"--image=x", "--watch-namespaces=spark-b,spark-a"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"spark-a", "spark-b"}; !reflect.DeepEqual(f.watchNamespaces, want) {
		t.Errorf("watchNamespaces %q, want %q", f.watchNamespaces, want)
	}
	if _, err := parseServeFlags([]string{"--image=x", "--watch-namespaces=a,,b"}); err == nil {
		t.Error("an empty namespace in --watch-namespaces was accepted")
	}
}

// What the webhooks serve: never the namespaces their selector skips (kube-system by default,
// --excluded-namespaces otherwise) nor driverset's own, whatever else is watched.
func TestServedNamespaces(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "") // outside a pod: the leader election's namespace is its own
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{args: nil, want: []string{"kube-system", "driverset-system"}},
		{args: []string{"--excluded-namespaces=kube-system,ops"}, want: []string{"kube-system", "ops", "driverset-system"}},
		{args: []string{"--excluded-namespaces="}, want: []string{"driverset-system"}},
	} {
		f, err := parseServeFlags(append([]string{"--image=x", "--leader-election-namespace=driverset-system"}, tc.args...))
		if err != nil {
			t.Fatal(err)
		}
		if got := servedBy(f, nil, false).Excluded; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: excluded %q, want %q", tc.args, got, tc.want)
		}
	}
	if _, err := parseServeFlags([]string{"--image=x", "--excluded-namespaces=Kube_System"}); err == nil {
		t.Error("a malformed --excluded-namespaces was accepted")
	}
	// --included-namespaces (the chart's webhook.includedNamespaces): only those are answered.
	f, err := parseServeFlags([]string{"--image=x", "--included-namespaces=spark-b,spark-a"})
	if err != nil {
		t.Fatal(err)
	}
	if got := servedBy(f, nil, false).Included; !reflect.DeepEqual(got, []string{"spark-a", "spark-b"}) {
		t.Errorf("included %q, want spark-a, spark-b", got)
	}
	if _, err := parseServeFlags([]string{"--image=x", "--included-namespaces=a,,b"}); err == nil {
		t.Error("an empty namespace in --included-namespaces was accepted")
	}
}

// Both caches, the manager's and the placeholders', watch only the watched namespaces, and keep
// what they select within them: a namespaced install never lists a pod elsewhere.
func TestWatchedCaches(t *testing.T) {
	for _, tc := range []struct {
		name       string
		namespaces []string
	}{
		{"cluster-wide", nil},
		{"namespaced", []string{"spark-a", "spark-b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for name, base := range map[string]cache.Options{
				"main":         controller.CacheOptions(),
				"placeholders": controller.PlaceholderCacheOptions(),
			} {
				got := watched(base, tc.namespaces)
				var ns []string
				for n := range got.DefaultNamespaces {
					ns = append(ns, n)
				}
				sort.Strings(ns)
				if !reflect.DeepEqual(ns, tc.namespaces) {
					t.Errorf("%s cache watches %q, want %q", name, ns, tc.namespaces)
				}
				if len(got.ByObject) != len(base.ByObject) || got.DefaultTransform == nil {
					t.Errorf("%s cache lost its selectors or transform", name)
				}
			}
		})
	}
}
