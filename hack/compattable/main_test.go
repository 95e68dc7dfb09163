package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/driverset/driverset"

func scenarios(t *testing.T) []scenario {
	t.Helper()
	s, err := parseList(strings.NewReader(`# a comment
./e2e/install TestInstall   the install
./e2e         TestGate      scheduling gates
./e2e         TestPodLevel  pod-level resources

./e2e         TestRenamed   a test that no longer exists
`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// One version's `go test -json` output: TestGate passed, TestPodLevel skipped, TestInstall
// failed in its own package (its note is the last line a _test.go file logged, a subtest's
// included: the error after the progress, not the harness's line); TestRenamed never ran.
const run130 = `{"Action":"run","Package":"github.com/driverset/driverset/e2e","Test":"TestGate"}
{"Action":"output","Package":"github.com/driverset/driverset/e2e","Test":"TestGate/sub","Output":"ok\n"}
{"Action":"pass","Package":"github.com/driverset/driverset/e2e","Test":"TestGate/sub","Elapsed":1}
{"Action":"pass","Package":"github.com/driverset/driverset/e2e","Test":"TestGate","Elapsed":3.41}
{"Action":"run","Package":"github.com/driverset/driverset/e2e","Test":"TestPodLevel"}
{"Action":"output","Package":"github.com/driverset/driverset/e2e","Test":"TestPodLevel","Output":"    podspec_test.go:185: Kubernetes v1.30.14 has no pod-level resources\n"}
{"Action":"output","Package":"github.com/driverset/driverset/e2e","Test":"TestPodLevel","Output":"--- SKIP: TestPodLevel (0.00s)\n"}
{"Action":"skip","Package":"github.com/driverset/driverset/e2e","Test":"TestPodLevel","Elapsed":0}
{"Action":"pass","Package":"github.com/driverset/driverset/e2e","Elapsed":60.2}
{"Action":"output","Package":"github.com/driverset/driverset/e2e/install","Test":"TestInstall","Output":"    cluster_test.go:10: the bed up after 2s\n"}
{"Action":"output","Package":"github.com/driverset/driverset/e2e/install","Test":"TestInstall/overlay","Output":"    cluster_test.go:12: apply: unknown field \"spec.x\"\n"}
{"Action":"output","Package":"github.com/driverset/driverset/e2e/install","Test":"TestInstall","Output":"    submit.go:107: spark-submit: a harness's line\n"}
{"Action":"output","Package":"github.com/driverset/driverset/e2e/install","Test":"TestInstall","Output":"--- FAIL: TestInstall (9.87s)\n"}
{"Action":"fail","Package":"github.com/driverset/driverset/e2e/install","Test":"TestInstall","Elapsed":9.87}
{"Action":"fail","Package":"github.com/driverset/driverset/e2e/install","Elapsed":12}
`

// The other version's: the e2e package failed before any test ran (its test bed did not start).
const run137 = `{"Action":"output","Package":"github.com/driverset/driverset/e2e","Output":"e2e: the test bed did not start: kube-apiserver exited\n"}
{"Action":"output","Package":"github.com/driverset/driverset/e2e","Output":"FAIL\tgithub.com/driverset/driverset/e2e\t3.2s\n"}
{"Action":"fail","Package":"github.com/driverset/driverset/e2e","Elapsed":3.2}
{"Action":"pass","Package":"github.com/driverset/driverset/e2e/install","Test":"TestInstall","Elapsed":20.04}
{"Action":"pass","Package":"github.com/driverset/driverset/e2e/install","Elapsed":21}
`

func TestTable(t *testing.T) {
	runs := []versionRun{}
	for _, v := range []struct{ name, json string }{{"v1.30.14", run130}, {"v1.37.2", run137}} {
		r, err := readRun(strings.NewReader(v.json))
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, versionRun{Version: v.name, Results: r})
	}
	var b strings.Builder
	failed := writeTable(&b, module, scenarios(t), runs)
	want := `| scenario | covers | v1.30.14 | v1.37.2 |
|---|---|---|---|
| TestInstall | the install | **FAIL** (9.9 s): cluster_test.go:12: apply: unknown field "spec.x" | pass (20.0 s) |
| TestGate | scheduling gates | pass (3.4 s) | **not run**: e2e: the test bed did not start: kube-apiserver exited |
| TestPodLevel | pod-level resources | skipped: podspec_test.go:185: Kubernetes v1.30.14 has no pod-level resources | **not run**: e2e: the test bed did not start: kube-apiserver exited |
| TestRenamed | a test that no longer exists | **not run**: no such test in its package | **not run**: e2e: the test bed did not start: kube-apiserver exited |
| go test, wall time | | e2e/install 12.0 s, e2e 60.2 s | e2e/install 21.0 s, e2e 3.2 s |
`
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
	if failed != 5 {
		t.Errorf("%d cells failed, want 5 (a failure, a missing test twice, and each test of a package that did not run)", failed)
	}
}

func TestRunPattern(t *testing.T) {
	pkgs, pattern := runPattern(scenarios(t))
	if want := "./e2e/install ./e2e"; strings.Join(pkgs, " ") != want {
		t.Errorf("packages %v, want %s", pkgs, want)
	}
	if want := "^(TestInstall|TestGate|TestPodLevel|TestRenamed)$"; pattern != want {
		t.Errorf("pattern %s, want %s", pattern, want)
	}
}

func TestParseListRefusesALineWithoutWhatItCovers(t *testing.T) {
	for _, line := range []string{"./e2e TestX", "TestX ./e2e covers", "./e2e NotATest covers"} {
		if _, err := parseList(strings.NewReader(line + "\n")); err == nil {
			t.Errorf("parseList accepted %q", line)
		}
	}
}

// The chart claims no older Kubernetes than make compat runs: Chart.yaml's kubeVersion floor is
// the minor version of COMPAT_OLDEST_KUBERNETES, so a change to either must change the other.
func TestChartClaimsTheOldestVersionCompatRuns(t *testing.T) {
	chart, err := os.ReadFile("../../charts/driverset/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env, err := os.ReadFile("../testbed-versions.env")
	if err != nil {
		t.Fatal(err)
	}
	claim := regexp.MustCompile(`(?m)^kubeVersion: ">=1\.(\d+)\.0-0"$`).FindSubmatch(chart)
	oldest := regexp.MustCompile(`(?m)^COMPAT_OLDEST_KUBERNETES=v1\.(\d+)\.\d+$`).FindSubmatch(env)
	if claim == nil || oldest == nil {
		t.Fatalf("Chart.yaml's kubeVersion (%q) or testbed-versions.env's COMPAT_OLDEST_KUBERNETES (%q) is not of the form this test reads", claim, oldest)
	}
	if string(claim[1]) != string(oldest[1]) {
		t.Errorf("the chart claims Kubernetes >=1.%s, make compat runs 1.%s as the oldest", claim[1], oldest[1])
	}
}

// The README says make compat covers every ValidatingAdmissionPolicy the install ships: each
// policy of manifests/base (which every flavour and the chart render; e2e/install holds them to
// it) is named by a scenario's "what it covers" in hack/compat-tests.txt, so a policy added
// without a scenario on the oldest Kubernetes fails here.
func TestCompatCoversEveryPolicyTheInstallShips(t *testing.T) {
	f, err := os.Open("../compat-tests.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	list, err := parseList(f)
	if err != nil {
		t.Fatal(err)
	}
	var covered strings.Builder
	for _, s := range list {
		covered.WriteString(" " + s.Covers)
	}
	files, err := filepath.Glob("../../manifests/base/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	policy := regexp.MustCompile(`(?m)^kind: ValidatingAdmissionPolicy\nmetadata:\n  name: (\S+)$`)
	found := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range policy.FindAllSubmatch(b, -1) {
			found++
			if name := string(m[1]); !regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(covered.String()) {
				t.Errorf("ValidatingAdmissionPolicy %s (%s) is named by no scenario of hack/compat-tests.txt", name, filepath.Base(file))
			}
		}
	}
	if found == 0 {
		t.Fatal("no ValidatingAdmissionPolicy found in manifests/base: the pattern no longer reads them")
	}
}
