package sparksim

import (
	"context"
	"testing"
)

// A PySpark app: 2.4 starts the driver with driver-py and hands the file over in the env; 3.0+
// starts it with driver and PythonRunner, the file as the primary resource. Either way the
// driver JVM runs PythonRunner on the file.
func TestPySparkDriver(t *testing.T) {
	for _, tc := range []struct {
		v     Version
		entry string
	}{{Spark24, "driver-py"}, {Spark35, "driver"}, {Spark41, "driver"}} {
		t.Run(string(tc.v), func(t *testing.T) {
			app := testApp(tc.v)
			app.PyFile = "local:///opt/app/pi.py"
			app.AppArgs = []string{"100"}
			res, c := submitted(t, app)
			if got := res.Pod.Spec.Containers[0].Args[0]; got != tc.entry {
				t.Errorf("entry %q, want %q", got, tc.entry)
			}
			d, err := StartDriverWith(context.Background(), c, "apps", res.Pod.Name, DriverOptions{Rand: seeded(9), Now: fixedNow})
			if err != nil {
				t.Fatal(err)
			}
			if d.MainClass() != PythonRunner || d.Primary() != app.PyFile {
				t.Errorf("the driver runs %s on %s, want %s on %s", d.MainClass(), d.Primary(), PythonRunner, app.PyFile)
			}
			if got := d.Conf()["spark.kubernetes.resource.type"]; got != "python" {
				t.Errorf("spark.kubernetes.resource.type = %q, want python", got)
			}
		})
	}
}
