package convert

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/wrap"
)

// What S-0's driver container runs, as the kubelet starts it in a pod of UID uid: the command
// and arguments concatenated, $(VAR)s of the pod's downward-API env expanded, then what wrap
// makes of them (wrap's own parser and DriverCommand).
func runsAs(t *testing.T, c *corev1.Container, uid string) []string {
	t.Helper()
	fields := map[string]string{"metadata.uid": uid, "metadata.name": "s-0", "metadata.namespace": "jobs"}
	var repl []string
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			repl = append(repl, "$("+e.Name+")", fields[e.ValueFrom.FieldRef.FieldPath])
		}
	}
	expand := strings.NewReplacer(repl...)
	var argv []string
	for _, a := range slices.Concat(c.Command, c.Args) {
		argv = append(argv, expand.Replace(a))
	}
	if len(argv) < 2 || argv[0] != BinaryPath || argv[1] != "wrap" {
		t.Fatalf("driver command %q is not driverset wrap", argv)
	}
	o, err := wrap.ParseArgs(argv[2:])
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := o.DriverCommand()
	if err != nil {
		t.Fatalf("wrap would not start the driver: %v", err)
	}
	return cmd
}

// appIDs are the spark.app.id settings of a driver command line.
func appIDs(argv []string) []string {
	var out []string
	for i := 0; i+1 < len(argv); i++ {
		if argv[i] == "--conf" && strings.HasPrefix(argv[i+1], "spark.app.id=") {
			out = append(out, strings.TrimPrefix(argv[i+1], "spark.app.id="))
		}
	}
	return out
}

// Every incarnation of the driver runs with an app id of its own: the submitted one and the first
// 8 hex digits of its pod's UID. Two pods, two ids; the same template, as the StatefulSet
// controller makes every incarnation from it.
func TestEachIncarnationRunsWithAnAppIDOfItsOwn(t *testing.T) {
	const id = "spark-0123456789abcdef0123456789abcdef"
	for _, selfFence := range []bool{false, true} {
		o := testOptions
		if selfFence {
			o.SelfFence = testOptions.SelfFence + 60e9
		}
		s, err := StatefulSet(persisted(driverPod()), o)
		if err != nil {
			t.Fatal(err)
		}
		c := &s.Spec.Template.Spec.Containers[0]
		first := runsAs(t, c, "3f2a9c1e-0b1c-4d2e-9f30-112233445566")
		second := runsAs(t, c, "9d8c7b6a-0b1c-4d2e-9f30-112233445566")
		if got := appIDs(first); !slices.Equal(got, []string{id + "-3f2a9c1e"}) {
			t.Errorf("self-fence %v: the first incarnation runs with app id(s) %q, want %s-3f2a9c1e", selfFence, got, id)
		}
		if got := appIDs(second); !slices.Equal(got, []string{id + "-9d8c7b6a"}) {
			t.Errorf("self-fence %v: the second incarnation runs with app id(s) %q, want %s-9d8c7b6a", selfFence, got, id)
		}
		n := 0
		for _, e := range c.Env {
			if e.Name == contract.EnvPodUID {
				n++
			}
		}
		if n != 1 {
			t.Errorf("self-fence %v: %d %s variables, want 1", selfFence, n, contract.EnvPodUID)
		}
	}
}

// A driver pod without an app id label, or with one too long to take the suffix within a label
// value's 63 characters, keeps the id it was submitted with, as before driverset gave each
// incarnation its own.
func TestAnAppIDThatCannotTakeTheSuffixIsKept(t *testing.T) {
	for name, label := range map[string]string{"no label": "", "54 characters": strings.Repeat("a", 55)} {
		t.Run(name, func(t *testing.T) {
			p := driverPod()
			if label == "" {
				delete(p.Labels, contract.LabelSparkAppSelector)
			} else {
				p.Labels[contract.LabelSparkAppSelector] = label
			}
			c := &buildS(t, persisted(p)).Spec.Template.Spec.Containers[0]
			if got := appIDs(runsAs(t, c, "3f2a9c1e-0b1c-4d2e-9f30-112233445566")); len(got) != 0 {
				t.Errorf("driver runs with spark.app.id %q, want the properties file's", got)
			}
		})
	}
}
