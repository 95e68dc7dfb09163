// Package spark runs the real Apache Spark in driverset's tests: its artifacts (Debian's JRE and
// Spark's jars from Maven Central, fetched and cached by hack/spark-artifacts.sh), an image made
// of them with an entrypoint of our own (entrypoint.sh, keeping the contract of Spark's), the jobs
// the scenarios run (job/: DriversetPi and the streaming jobs, compiled here), the real
// spark-submit run from the host, as a user would run it, and the check that the streaming jobs'
// output is exactly once after any losses (stream.go).
//
// e2e/sparksim imitates Spark for the fast suite; this package is what the imitation is checked
// against.
package spark
