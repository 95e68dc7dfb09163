package wrap

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// A driver's executors that outlive it (on a node cut off with it) reach the next incarnation at
// the same stable name and port. Spark's RPC authentication fences them out: on Kubernetes each
// driver JVM makes a secret of its own (SecurityManager.initializeAuth) and gives it to its
// executors only, so a stale executor fails the handshake with the next driver. wrap turns it on
// for every driver whose app has not chosen: an app that turned it off, or takes its secret from
// files that outlive the incarnation, runs as it asked, and wrap says its executors are not fenced.
func TestDriverCommandFencesStaleExecutors(t *testing.T) {
	dir := t.TempDir()
	props := func(name, body string) string { return writeFile(t, dir, name, body) }
	plain := props("plain.properties", "spark.app.name=pi\n# spark.authenticate=false\n")
	on := props("on.properties", "spark.authenticate=true\n")
	off := props("off.properties", "spark.authenticate = False\n")
	file := props("file.properties", "spark.authenticate=true\nspark.authenticate.secret.file=/etc/spark-secret/key\n")
	fileUnset := props("fileunset.properties", "spark.authenticate.secret.driver.file=/s/d\nspark.authenticate.secret.executor.file=/s/e\n")
	const entry = "/opt/entrypoint.sh"
	// Every command ends with a job argument that looks like a setting: what follows the primary
	// resource is the job's, not spark-submit's, so it never counts.
	command := func(propsFile string, more ...string) []string {
		c := []string{entry, "driver", "--conf", "spark.driver.host=pi-driver-0.pi-driver.ns.svc"}
		c = append(c, more...)
		if propsFile != "" {
			c = append(c, "--properties-file", propsFile)
		}
		return append(c, "--class", "Pi", "spark-internal", "--conf", "spark.authenticate=false")
	}
	fence := []string{"--conf", "spark.authenticate=true"}
	// added is command with the fence right after the entry command, before every setting of the
	// app's: a later --conf of the app's own still wins in spark-submit.
	added := func(c []string) []string { return slices.Concat(c[:2], fence, c[2:]) }
	cases := []struct {
		name    string
		command []string
		want    []string
		notice  string // a part of the notice wrap logs, "" for none
	}{
		{"unset: turned on", command(plain), added(command(plain)), ""},
		{"no properties file, unset: turned on", command(""), added(command("")), ""},
		{"set true in the properties file: as it is", command(on), command(on), ""},
		{"set true on the command line: as it is", command(plain, "--conf", "spark.authenticate=true"), command(plain, "--conf", "spark.authenticate=true"), ""},
		{"set false in the properties file: as it is, said", command(off), command(off), "spark.authenticate=false"},
		{"set false on the command line: as it is, said", command(on, "--conf", "spark.authenticate=false"), command(on, "--conf", "spark.authenticate=false"), "spark.authenticate=false"},
		{"a secret file: as it is, said", command(file), command(file), "spark.authenticate.secret.file"},
		{"secret files, authentication unset: as it is, said", command(fileUnset), command(fileUnset), "spark.authenticate.secret.driver.file"},
		{"not a spark-submit command: as it is", []string{entry, "driver"}, []string{entry, "driver"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkDriverCommand(t, Options{Command: slices.Clone(tc.command)}, tc.want)
			notice := executorFenceOf(tc.command, os.ReadFile).notice
			if (tc.notice == "") != (notice == "") || !strings.Contains(notice, tc.notice) {
				t.Errorf("notice %q, want one with %q", notice, tc.notice)
			}
			if notice != "" && !strings.Contains(notice, "not fenced") {
				t.Errorf("notice %q does not say the stale executors are not fenced", notice)
			}
		})
	}
}

// The notice reaches the driver container's log, where wrap's own lines are.
func TestRunSaysWhenStaleExecutorsAreNotFenced(t *testing.T) {
	dir := t.TempDir()
	var stderr strings.Builder
	o := Options{StateDir: dir, Command: []string{"true", "driver", "--conf", "spark.authenticate=false"}, Stderr: &stderr}
	if code, err := Run(t.Context(), o); code != 0 || err != nil {
		t.Fatalf("Run() = %d, %v", code, err)
	}
	if !strings.Contains(stderr.String(), logPrefix+"spark.authenticate=false") {
		t.Errorf("wrap's log does not say the executors are not fenced:\n%s", stderr.String())
	}
}
