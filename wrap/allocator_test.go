package wrap

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Spark's StatefulSet executor allocator names its set spark-s-<app id>-<resource profile>, and
// the StatefulSet controller labels each pod controller-revision-hash=<set name>-<hash>, a label
// value of at most 63 characters: with Spark's own id (spark-<32 hex>) the name has room, with the
// incarnation's suffix it has not, and the apiserver refuses every executor pod (seen on real
// nodes, Spark 3.5.6: "metadata.labels: Invalid value: ...: must be no more than 63 bytes"). So
// a driver that uses that allocator gets an incarnation id cut to fit, its suffix kept whole.
func TestDriverCommandFitsTheStatefulSetAllocatorsNames(t *testing.T) {
	const uid = "3f2a9c1e-0b1c-4d2e-9f30-112233445566"
	const submitted = "spark-92fe034a2bc24e8c941c1aee17019678" // Spark's form: spark-<32 hex>
	dir := t.TempDir()
	props := func(name, body string) string { return writeFile(t, dir, name, body) }
	statefulset := props("sts.properties", "#Spark properties\nspark.app.name=pi\nspark.kubernetes.allocation.pods.allocator=statefulset\nspark.executor.instances=2\n")
	spaced := props("spaced.properties", "  spark.kubernetes.allocation.pods.allocator : statefulset\n")
	direct := props("direct.properties", "spark.kubernetes.allocation.pods.allocator=direct\n")
	none := props("none.properties", "spark.app.name=pi\n# spark.kubernetes.allocation.pods.allocator=statefulset\n")
	command := func(propsFile string, more ...string) []string {
		c := []string{"/opt/entrypoint.sh", "driver"}
		if propsFile != "" {
			c = append(c, "--properties-file", propsFile)
		}
		return append(append(c, "--conf", "spark.app.id="+submitted), append(more, "--class", "Pi", "spark-internal")...)
	}
	const whole, cut = submitted + "-3f2a9c1e", "spark-92fe034a2bc24e8c941c1aee17-3f2a9c1e"
	cases := []struct {
		name    string
		command []string
		want    string
	}{
		{"the default allocator: the whole submitted id", command(none), whole},
		{"no properties file", command(""), whole},
		{"direct, as the properties file says", command(direct), whole},
		{"statefulset in the properties file: cut to fit", command(statefulset), cut},
		{"statefulset, Java's other separator and spaces", command(spaced), cut},
		{"statefulset on the command line", command(none, "--conf", "spark.kubernetes.allocation.pods.allocator=statefulset"), cut},
		{"the command line beats the properties file", command(statefulset, "--conf", "spark.kubernetes.allocation.pods.allocator=direct"), whole},
		{"a properties file that cannot be read: Spark's to refuse", command(filepath.Join(dir, "missing")), whole},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Options{Command: tc.command, SparkAppID: submitted, Incarnation: uid}.DriverCommand()
			if err != nil {
				t.Fatal(err)
			}
			i := slices.Index(got, "spark.app.id="+tc.want)
			if i < 0 {
				t.Fatalf("DriverCommand() = %q, want spark.app.id=%s", got, tc.want)
			}
			// What the allocator and the StatefulSet controller make of it must be valid.
			if set := "spark-s-" + tc.want + "-99"; strings.Contains(tc.name, "statefulset") && len(set+"-0123456789") > maxLabelValue {
				t.Errorf("executor StatefulSet %s: its pods' controller-revision-hash would be %d characters", set, len(set+"-0123456789"))
			}
		})
	}
}

// writeFile writes body to the file name in dir and returns its path.
func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
