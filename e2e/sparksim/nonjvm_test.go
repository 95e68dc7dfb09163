package sparksim

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A PySpark or SparkR app. 2.4 starts the driver with driver-py / driver-r and hands the file
// over in the env, a local:// file as its bare path (KubernetesUtils.resolveFileUri), which the
// entrypoint appends after "$@". 3.0+ starts it with driver and PythonRunner / RRunner, the file
// as written being the primary resource. Either way the driver JVM runs the runner on the file.
func TestNonJVMDriver(t *testing.T) {
	for _, tc := range []struct {
		name      string
		v         Version
		py, r     string
		entry     string
		mainClass string
		primary   string // the file the driver's spark-submit gets
		resType   string // spark.kubernetes.resource.type
	}{
		{name: "2.4 PySpark", v: Spark24, py: "local:///opt/app/pi.py", entry: "driver-py", mainClass: PythonRunner, primary: "/opt/app/pi.py", resType: "python"},
		{name: "3.5 PySpark", v: Spark35, py: "local:///opt/app/pi.py", entry: "driver", mainClass: PythonRunner, primary: "local:///opt/app/pi.py", resType: "python"},
		{name: "4.1 PySpark", v: Spark41, py: "local:///opt/app/pi.py", entry: "driver", mainClass: PythonRunner, primary: "local:///opt/app/pi.py", resType: "python"},
		{name: "2.4 SparkR", v: Spark24, r: "local:///opt/app/pi.R", entry: "driver-r", mainClass: RRunner, primary: "/opt/app/pi.R", resType: "r"},
		{name: "3.5 SparkR", v: Spark35, r: "local:///opt/app/pi.R", entry: "driver", mainClass: RRunner, primary: "local:///opt/app/pi.R", resType: "r"},
		{name: "4.1 SparkR", v: Spark41, r: "local:///opt/app/pi.R", entry: "driver", mainClass: RRunner, primary: "local:///opt/app/pi.R", resType: "r"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := testApp(tc.v)
			app.PyFile, app.RFile = tc.py, tc.r
			app.AppArgs = []string{"100", "7"}
			res, c := submitted(t, app)
			if got := res.Pod.Spec.Containers[0].Args[0]; got != tc.entry {
				t.Errorf("entry %q, want %q", got, tc.entry)
			}
			d, err := StartDriverWith(context.Background(), c, "apps", res.Pod.Name, DriverOptions{Rand: seeded(9), Now: fixedNow})
			if err != nil {
				t.Fatal(err)
			}
			if d.MainClass() != tc.mainClass || d.Primary() != tc.primary || !slices.Equal(d.AppArgs(), app.AppArgs) {
				t.Errorf("the driver runs %s on %s %q, want %s on %s %q", d.MainClass(), d.Primary(), d.AppArgs(), tc.mainClass, tc.primary, app.AppArgs)
			}
			if got := d.Conf()["spark.kubernetes.resource.type"]; got != tc.resType {
				t.Errorf("spark.kubernetes.resource.type = %q, want %q", got, tc.resType)
			}
		})
	}
}

// What Spark 2.4's PythonDriverFeatureStep and RDriverFeatureStep put in the driver container:
// the entry and three arguments, and the env after the local dirs' (Client.run adds
// SPARK_CONF_DIR last). PYSPARK_FILES is always there: spark-submit sets
// spark.kubernetes.python.pyFiles to "" when there are no --py-files, and "" resolves to "".
func TestSpark24NonJVMContainer(t *testing.T) {
	base := []string{"SPARK_DRIVER_BIND_ADDRESS", "SPARK_LOCAL_DIRS"}
	for _, tc := range []struct {
		name    string
		py, r   string
		args    []string
		conf    map[string]string
		want    []string          // container args
		envKeys []string          // env names after base, in order
		env     map[string]string // their values
		props   map[string]string // in spark.properties
	}{{
		name: "PySpark, local file, arguments",
		py:   "local:///opt/app/pi.py", args: []string{"100", "x"},
		want:    []string{"driver-py", "--properties-file", SparkConfPath, "--class", PythonRunner},
		envKeys: []string{"PYSPARK_PRIMARY", "PYSPARK_MAJOR_PYTHON_VERSION", "PYSPARK_APP_ARGS", "PYSPARK_FILES", "SPARK_CONF_DIR"},
		env:     map[string]string{"PYSPARK_PRIMARY": "/opt/app/pi.py", "PYSPARK_MAJOR_PYTHON_VERSION": "2", "PYSPARK_APP_ARGS": "100 x", "PYSPARK_FILES": ""},
		props: map[string]string{"spark.kubernetes.resource.type": "python", "spark.kubernetes.python.mainAppResource": "local:///opt/app/pi.py",
			"spark.kubernetes.memoryOverheadFactor": "0.4"},
	}, {
		name: "PySpark, remote file, Python 3, no arguments",
		py:   "https://files.example/pi.py", conf: map[string]string{"spark.kubernetes.pyspark.pythonVersion": "3"},
		want:    []string{"driver-py", "--properties-file", SparkConfPath, "--class", PythonRunner},
		envKeys: []string{"PYSPARK_PRIMARY", "PYSPARK_MAJOR_PYTHON_VERSION", "PYSPARK_FILES", "SPARK_CONF_DIR"},
		env:     map[string]string{"PYSPARK_PRIMARY": "https://files.example/pi.py", "PYSPARK_MAJOR_PYTHON_VERSION": "3", "PYSPARK_FILES": ""},
		props:   map[string]string{"spark.kubernetes.python.mainAppResource": "https://files.example/pi.py"},
	}, {
		name: "SparkR, local file, arguments",
		r:    "local:///opt/app/pi.R", args: []string{"10", "20"},
		want:    []string{"driver-r", "--properties-file", SparkConfPath, "--class", RRunner},
		envKeys: []string{"R_PRIMARY", "R_APP_ARGS", "SPARK_CONF_DIR"},
		env:     map[string]string{"R_PRIMARY": "/opt/app/pi.R", "R_APP_ARGS": "10 20"},
		props: map[string]string{"spark.kubernetes.resource.type": "r", "spark.kubernetes.r.mainAppResource": "local:///opt/app/pi.R",
			"spark.kubernetes.memoryOverheadFactor": "0.4"},
	}, {
		name: "SparkR, file: URI kept, no arguments, own overhead factor",
		r:    "file:///opt/app/pi.R", conf: map[string]string{"spark.kubernetes.memoryOverheadFactor": "0.2"},
		want:    []string{"driver-r", "--properties-file", SparkConfPath, "--class", RRunner},
		envKeys: []string{"R_PRIMARY", "SPARK_CONF_DIR"},
		env:     map[string]string{"R_PRIMARY": "file:///opt/app/pi.R"},
		props:   map[string]string{"spark.kubernetes.memoryOverheadFactor": "0.2"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			app := testApp(Spark24)
			app.PyFile, app.RFile, app.AppArgs, app.Conf = tc.py, tc.r, tc.args, tc.conf
			p, err := app.Plan()
			if err != nil {
				t.Fatal(err)
			}
			ctr := p.DriverPod.Spec.Containers[0]
			if !slices.Equal(ctr.Args, tc.want) {
				t.Errorf("args %q, want %q", ctr.Args, tc.want)
			}
			if got, want := envNames(ctr.Env), append(slices.Clone(base), tc.envKeys...); !slices.Equal(got, want) {
				t.Errorf("env %q, want %q", got, want)
			}
			for _, e := range ctr.Env {
				if want, ok := tc.env[e.Name]; ok && (e.Value != want || e.ValueFrom != nil) {
					t.Errorf("%s = %q, want %q", e.Name, e.Value, want)
				}
			}
			for k, want := range tc.props {
				if got, ok := p.Properties[k]; !ok || got != want {
					t.Errorf("property %s = %q (set %v), want %q", k, got, ok, want)
				}
			}
		})
	}
}

// 2.4's non-JVM overhead factor, 0.4, makes the driver's memory 1024 + 409 MiB.
func TestSpark24NonJVMMemory(t *testing.T) {
	app := testApp(Spark24)
	app.RFile = "local:///opt/app/pi.R"
	p, err := app.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if got := p.DriverPod.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]; got.String() != "1433Mi" {
		t.Errorf("driver memory %s, want 1433Mi", got.String())
	}
}

func TestResolveFileURI(t *testing.T) {
	for in, want := range map[string]string{
		"local:///opt/app/pi.py":       "/opt/app/pi.py",
		"local://host/opt/app/a%20b.R": "/opt/app/a b.R",
		"file:///opt/app/pi.py":        "file:///opt/app/pi.py",
		"https://files.example/pi.py":  "https://files.example/pi.py",
		"/opt/app/pi.py":               "/opt/app/pi.py",
		"":                             "",
	} {
		if got := resolveFileURI(in); got != want {
			t.Errorf("resolveFileURI(%q) = %q, want %q", in, got, want)
		}
	}
}
