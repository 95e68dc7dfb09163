package contract

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TestNamesFor: for any valid pod name, the names are deterministic, valid for their kinds, short
// enough for the StatefulSet controller's labels, and distinct for distinct long names.
func TestNamesFor(t *testing.T) {
	cases := []struct {
		placeholder string
		sts, svc    string // "" = only the properties are checked
	}{
		{placeholder: "spark-pi-8e3c5a1f0b7d2e49-driver", sts: "spark-pi-8e3c5a1f0b7d2e49-driver", svc: "spark-pi-8e3c5a1f0b7d2e49-driver-ds"},
		{placeholder: "2024-report-driver", sts: "2024-report-driver", svc: "ds-2024-report-driver-ds"},
		{placeholder: strings.Repeat("a", 52), sts: strings.Repeat("a", 52), svc: strings.Repeat("a", 52) + "-ds"},
		{placeholder: strings.Repeat("a", 53)},
		{placeholder: "spark.pi.driver"},
		{placeholder: "clickstream-sessionization-to-lakehouse-checkpointed-driver"},
		{placeholder: strings.Repeat("b", 42) + "-" + strings.Repeat("c", 20)}, // cut right after a hyphen
		{placeholder: strings.Repeat("9", 253)},
		{placeholder: strings.Repeat("x.", 126) + "y"},
	}
	for _, tc := range cases {
		t.Run(tc.placeholder, func(t *testing.T) {
			n := NamesFor(tc.placeholder)
			if n != NamesFor(tc.placeholder) {
				t.Fatal("not deterministic")
			}
			if tc.sts != "" && (n.StatefulSet != tc.sts || n.Service != tc.svc) {
				t.Errorf("NamesFor = %+v, want {%s %s}", n, tc.sts, tc.svc)
			}
			if len(n.StatefulSet) > MaxStatefulSetName {
				t.Errorf("StatefulSet %q has %d characters, more than %d", n.StatefulSet, len(n.StatefulSet), MaxStatefulSetName)
			}
			for what, errs := range map[string][]string{
				"StatefulSet " + n.StatefulSet:    validation.IsDNS1123Label(n.StatefulSet),
				"driver pod " + n.DriverPodName(): validation.IsDNS1123Label(n.DriverPodName()),
				"Service " + n.Service:            validation.IsDNS1035Label(n.Service),
				"label value " + n.StatefulSet:    validation.IsValidLabelValue(n.StatefulSet),
				"controller-revision-hash value":  validation.IsValidLabelValue(n.StatefulSet + "-" + strings.Repeat("f", 10)),
				"driver host":                     validation.IsDNS1123Subdomain(n.DriverHost("a-namespace")),
			} {
				for _, e := range errs {
					t.Errorf("%s: %s", what, e)
				}
			}
			if n.Service == tc.placeholder+"-driver-svc" || strings.HasSuffix(n.Service, "-driver-svc") {
				t.Errorf("Service %q could collide with Spark's own driver Service", n.Service)
			}
			if NamesOfStatefulSet(n.StatefulSet) != n {
				t.Errorf("NamesOfStatefulSet(%q) = %+v, want %+v", n.StatefulSet, NamesOfStatefulSet(n.StatefulSet), n)
			}
		})
	}
}

func TestNamesForLongNamesDiffer(t *testing.T) {
	prefix := strings.Repeat("a", 60)
	a, b := NamesFor(prefix+"-one-driver"), NamesFor(prefix+"-two-driver")
	if a.StatefulSet == b.StatefulSet {
		t.Errorf("two long names sharing a prefix map to one StatefulSet %q", a.StatefulSet)
	}
	if d, h := NamesFor("spark.pi"), NamesFor("spark-pi"); d.StatefulSet == h.StatefulSet {
		t.Errorf("a dotted name and its hyphenated twin map to one StatefulSet %q", d.StatefulSet)
	}
}

// The suffix is 64 bits; the names an earlier driverset gave (32 bits) stay computable, and are
// the same where no suffix is needed.
func TestNamesForSuffixBits(t *testing.T) {
	long := strings.Repeat("a", 60) + "-driver"
	n, legacy := NamesFor(long), LegacyNamesFor(long)
	suffix := func(s string) string { return s[strings.LastIndex(s, "-")+1:] }
	if got := len(suffix(n.StatefulSet)); got != 16 {
		t.Errorf("NamesFor(%q) = %q: a suffix of %d hex digits, want 16 (64 bits)", long, n.StatefulSet, got)
	}
	if got := len(suffix(legacy.StatefulSet)); got != 8 {
		t.Errorf("LegacyNamesFor(%q) = %q: a suffix of %d hex digits, want 8", long, legacy.StatefulSet, got)
	}
	if !strings.HasPrefix(suffix(n.StatefulSet), suffix(legacy.StatefulSet)) {
		t.Errorf("the two suffixes are not from one hash: %q, %q", n.StatefulSet, legacy.StatefulSet)
	}
	if NamesFor("pi-driver") != LegacyNamesFor("pi-driver") {
		t.Error("a short name has two names")
	}
}

// CandidateNamesFor: this build's names first, then the legacy ones, each once.
func TestCandidateNamesFor(t *testing.T) {
	long := strings.Repeat("a", 60) + "-driver"
	for _, tc := range []struct {
		placeholder string
		want        []Names
	}{
		{"pi-driver", []Names{NamesFor("pi-driver")}},
		{long, []Names{NamesFor(long), LegacyNamesFor(long)}},
	} {
		got := CandidateNamesFor(tc.placeholder)
		if len(got) != len(tc.want) || got[0] != tc.want[0] || len(got) == 2 && got[1] != tc.want[1] {
			t.Errorf("CandidateNamesFor(%q) = %v, want %v", tc.placeholder, got, tc.want)
		}
	}
}

func TestDriverHost(t *testing.T) {
	if got, want := NamesFor("pi-driver").DriverHost("jobs"), "pi-driver-0.pi-driver-ds.jobs.svc"; got != want {
		t.Errorf("DriverHost = %q, want %q", got, want)
	}
}
