package convert

import "github.com/driverset/driverset/contract"

// Spark 2.4's entry commands for PySpark and R drivers.
const (
	EntryDriverPy = "driver-py"
	EntryDriverR  = "driver-r"
)

// IsDriverEntry reports whether arg, a container's first argument, starts a Spark cluster-mode
// driver. "driver" is every version's. Spark 2.4 starts PySpark and R drivers with "driver-py"
// and "driver-r" (its PythonDriverFeatureStep / RDriverFeatureStep; the image entrypoint runs the
// same `spark-submit --deploy-mode client "$@"` and appends $PYSPARK_PRIMARY/$R_PRIMARY and their
// arguments from the env); Spark 3.0 merged all three into "driver" (SPARK-25875), with
// PythonRunner or RRunner as the main class. The entrypoint shifts the first argument and passes
// the rest through, so driverset's `--conf` right after any of them reaches spark-submit the same
// way: they are converted alike.
func IsDriverEntry(arg string) bool {
	switch arg {
	case contract.RoleDriver, EntryDriverPy, EntryDriverR:
		return true
	}
	return false
}
