package spark

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLauncherCommand(t *testing.T) {
	for _, tc := range []struct {
		name     string
		out      string
		words    []string
		messages string
		err      bool
	}{
		{name: "the start flag first", out: "\x00\n/usr/bin/java\x00-cp\x00/x/*\x00Main\x00",
			words: []string{"/usr/bin/java", "-cp", "/x/*", "Main"}},
		{name: "messages before the flag are the user's", out: "Warning: something\n\x00\n/usr/bin/java\x00Main\x00",
			words: []string{"/usr/bin/java", "Main"}, messages: "Warning: something\n"},
		{name: "a word may hold blanks and newlines", out: "\x00\njava\x00--conf\x00a=b c\nd\x00",
			words: []string{"java", "--conf", "a=b c\nd"}},
		{name: "no flag: an error, not a command", out: "Error: Missing application resource.\n", err: true},
		{name: "an empty command", out: "\x00\n", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			words, messages, err := launcherCommand([]byte(tc.out))
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if !reflect.DeepEqual(words, tc.words) {
				t.Errorf("words = %q, want %q", words, tc.words)
			}
			if !tc.err && string(messages) != tc.messages {
				t.Errorf("messages = %q, want %q", messages, tc.messages)
			}
		})
	}
}

func TestParseArtifacts(t *testing.T) {
	dir := t.TempDir()
	jre := filepath.Join(dir, "jre.tar")
	home := filepath.Join(dir, "spark-3.5.6-r2")
	for _, f := range []string{jre, filepath.Join(home, "layer.tar"), filepath.Join(home, "RELEASE")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	py := filepath.Join(dir, "pyspark-3.5.6", "layer.tar")
	if err := os.MkdirAll(filepath.Dir(py), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(py, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := parseArtifacts([]byte("jre " + jre + "\nspark 3.5.6 2.12 " + home + "\npyspark 3.5.6 " + py + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Dist{{Version: "3.5.6", Scala: "2.12", Home: home, Layer: filepath.Join(home, "layer.tar"), JRE: jre, Python: py}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	for name, out := range map[string]string{
		"no JRE":           "spark 3.5.6 2.12 " + home + "\n",
		"no Spark":         "jre " + jre + "\n",
		"an unknown line":  "jre " + jre + "\nspark 3.5.6 2.12 " + home + "\nsomething else\n",
		"a missing layer":  "jre " + jre + "\nspark 4.1.1 2.13 " + filepath.Join(dir, "absent") + "\n",
		"no Scala version": "jre " + jre + "\nspark 3.5.6 " + home + "\n",
	} {
		if _, err := parseArtifacts([]byte(out)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := Find(got, "4.1.1"); err == nil {
		t.Error("Find made up a version")
	}
}

func TestSubmitArgs(t *testing.T) {
	a := App{
		Dist:      Dist{Version: "3.5.6"},
		Master:    "https://10.77.0.1:6443",
		Namespace: "team-a",
		Name:      "pi",
		Conf:      map[string]string{"spark.z": "1", "spark.a": "2"},
		Args:      []string{"24", "1000"},
	}
	got := strings.Join(a.SubmitArgs(), " ")
	want := "--master k8s://https://10.77.0.1:6443 --deploy-mode cluster --name pi --class DriversetPi" +
		" --conf spark.kubernetes.namespace=team-a --conf spark.kubernetes.container.image=driverset.test/spark:3.5.6" +
		" --conf spark.kubernetes.container.image.pullPolicy=Never --conf spark.a=2 --conf spark.z=1" +
		" local:///opt/spark/examples/jars/driverset-pi.jar 24 1000"
	if got != want {
		t.Errorf("spark-submit %s\nwant        %s", got, want)
	}
	a.Python = true
	got = strings.Join(a.SubmitArgs(), " ")
	if strings.Contains(got, "--class") || !strings.Contains(got, " local:///opt/spark/examples/src/main/python/driverset_pi.py 24 1000") {
		t.Errorf("PySpark: spark-submit %s", got)
	}
	a.PyFile = PyStreamPath
	if got = strings.Join(a.SubmitArgs(), " "); !strings.Contains(got, " local:///opt/spark/examples/src/main/python/driverset_stream.py 24 1000") {
		t.Errorf("the PySpark stream: spark-submit %s", got)
	}
	a.Python, a.Class = false, StreamStateClass
	if got = strings.Join(a.SubmitArgs(), " "); !strings.Contains(got, " --class DriversetStreamState ") {
		t.Errorf("the stateful stream: spark-submit %s", got)
	}
}
