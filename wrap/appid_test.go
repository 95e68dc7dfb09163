package wrap

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every incarnation of a driver gets an app id of its own, <submitted id>-<first 8 hex digits of
// its pod's UID>: Spark names its event log, labels its executors and selects what its clean stop
// deletes by app id, and an id shared across incarnations makes the second one's event log
// collide with the first one's (Spark 4.x refuses to start).
func TestDriverCommandGivesEachIncarnationItsOwnAppID(t *testing.T) {
	const uid = "3F2A9C1E-0b1c-4d2e-9f30-112233445566"
	entry := []string{"/opt/entrypoint.sh", "driver", "--conf", "spark.kubernetes.driver.pod.name=s-0"}
	// fenced is c as wrap runs it: Spark's authentication turned on before the first setting
	// (TestDriverCommandFencesStaleExecutors).
	fenced := func(c []string) []string {
		return slices.Concat(c[:2], []string{"--conf", "spark.authenticate=true"}, c[2:])
	}
	cases := []struct {
		name       string
		appID, inc string
		command    []string
		want       []string
		wantErr    string
	}{
		{name: "no app id asked for: the command as given",
			command: slices.Concat(entry, []string{"--conf", "spark.app.id=spark-abc"}),
			want:    fenced(slices.Concat(entry, []string{"--conf", "spark.app.id=spark-abc"}))},
		{name: "the submitted id gets the incarnation's suffix",
			appID: "spark-abc", inc: uid,
			command: slices.Concat(entry, []string{"--conf", "spark.app.id=spark-abc", "--class", "Main", "spark-internal"}),
			want:    fenced(slices.Concat(entry, []string{"--conf", "spark.app.id=spark-abc-3f2a9c1e", "--class", "Main", "spark-internal"}))},
		{name: "a job argument that looks the same is the job's",
			appID: "spark-abc", inc: uid,
			command: slices.Concat(entry, []string{"--conf", "spark.app.id=spark-abc", "spark-internal", "spark.app.id=spark-abc"}),
			want:    fenced(slices.Concat(entry, []string{"--conf", "spark.app.id=spark-abc-3f2a9c1e", "spark-internal", "spark.app.id=spark-abc"}))},
		{name: "a UID without dashes",
			appID: "spark-abc", inc: "0123456789abcdef0123456789abcdef",
			command: []string{"e", "driver", "--conf", "spark.app.id=spark-abc"},
			want:    fenced([]string{"e", "driver", "--conf", "spark.app.id=spark-abc-01234567"})},

		{name: "no --conf spark.app.id=<id> to give it to",
			appID: "spark-abc", inc: uid, command: entry,
			wantErr: "the driver command sets no spark.app.id=spark-abc"},
		{name: "another id",
			appID: "spark-abc", inc: uid, command: slices.Concat(entry, []string{"--conf", "spark.app.id=spark-xyz"}),
			wantErr: "the driver command sets no spark.app.id=spark-abc"},
		{name: "an app id without an incarnation",
			appID: "spark-abc", command: slices.Concat(entry, []string{"--conf", "spark.app.id=spark-abc"}),
			wantErr: "--incarnation"},
		{name: "an incarnation the kubelet did not expand",
			appID: "spark-abc", inc: "$(DRIVERSET_POD_UID)", command: slices.Concat(entry, []string{"--conf", "spark.app.id=spark-abc"}),
			wantErr: `incarnation "$(DRIVERSET_POD_UID)" is not a pod UID`},
		{name: "an id that would not fit a label with the suffix",
			appID: strings.Repeat("a", 55), inc: uid, command: slices.Concat(entry, []string{"--conf", "spark.app.id=" + strings.Repeat("a", 55)}),
			wantErr: "longer than 63 characters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Command: slices.Clone(tc.command), SparkAppID: tc.appID, Incarnation: tc.inc}
			if tc.wantErr != "" {
				if got, err := o.DriverCommand(); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("DriverCommand() = %q, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			checkDriverCommand(t, o, tc.want)
		})
	}
}

// checkDriverCommand: o's DriverCommand is want, and o's Command is left as it was.
func checkDriverCommand(t *testing.T, o Options, want []string) {
	t.Helper()
	command := slices.Clone(o.Command)
	got, err := o.DriverCommand()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("DriverCommand() =\n %q\nwant\n %q", got, want)
	}
	if !slices.Equal(o.Command, command) {
		t.Errorf("DriverCommand changed Options.Command to %q", o.Command)
	}
}

// The driver runs with its incarnation's app id, and a command that cannot be given it is not
// started: nothing recorded, so the kubelet's next start tries again (125, "not starting").
func TestRunStartsTheDriverWithItsIncarnationsAppID(t *testing.T) {
	const uid = "3f2a9c1e-0b1c-4d2e-9f30-112233445566"
	run := func(p pod, command []string) (int, error) {
		var out bytes.Buffer
		return Run(context.Background(), Options{StateDir: p.state, TerminationLog: p.termLog, Command: command,
			SparkAppID: "spark-abc", Incarnation: uid, Stdout: &out, Stderr: &out, Signals: make(chan os.Signal)})
	}
	p := newPod(t)
	if code, err := run(p, child(t, "args", p.side, "--conf", "spark.app.id=spark-abc")); code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	got, err := os.ReadFile(filepath.Join(p.side, "args"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "--conf\nspark.authenticate=true\n--conf\nspark.app.id=spark-abc-3f2a9c1e\n"; string(got) != want {
		t.Errorf("the driver got %q, want %q", got, want)
	}

	q := newPod(t)
	code, err := run(q, child(t, "args", q.side))
	if code != ExitWrapFailed || err == nil {
		t.Errorf("Run = %d, %v for a command without the app id, want %d and why", code, err, ExitWrapFailed)
	}
	if _, err := os.Stat(filepath.Join(q.side, "args")); err == nil {
		t.Error("the driver ran without its incarnation's app id")
	}
	if msg, _ := os.ReadFile(q.termLog); !DriverNotStarted(string(msg)) {
		t.Errorf("termination message %q does not say the driver was not started", msg)
	}
	if _, err := os.Stat(filepath.Join(q.state, "started")); err == nil {
		t.Error("wrap marked the driver started")
	}
}

func TestParseArgsAppIDFlags(t *testing.T) {
	// The controller reads the container's command alone, before the kubelet expands $(VAR):
	// ParseArgs must take it as it is written there.
	o, err := ParseArgs([]string{"--spark-app-id", "spark-abc", "--incarnation", "$(DRIVERSET_POD_UID)", "--", "cmd"})
	if err != nil {
		t.Fatal(err)
	}
	if o.SparkAppID != "spark-abc" || o.Incarnation != "$(DRIVERSET_POD_UID)" {
		t.Errorf("ParseArgs = %+v", o)
	}
}
