package spark

import (
	_ "embed"
	"os"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/images"
)

//go:embed entrypoint.sh
var entrypoint []byte

//go:embed job/driverset_pi.py
var pyJob []byte

//go:embed job/driverset_stream.py
var pyStreamJob []byte

// Where the image keeps Spark and the job, as Spark's images do.
const (
	sparkHome = "/opt/spark"
	// JobJarPath is the jobs' jar in the image (CompileJob's); submit it as
	// "local://" + JobJarPath.
	JobJarPath = sparkHome + "/examples/jars/driverset-pi.jar"
	// JobClass is the pi job's main class (job/DriversetPi.java).
	JobClass = "DriversetPi"
	// StreamClass is the stateless streaming job's main class (job/DriversetStream.java): a
	// file sink, checked by CheckFileSink.
	StreamClass = "DriversetStream"
	// StreamStateClass is the stateful streaming job's (job/DriversetStreamState.java):
	// foreachBatch files, checked by CheckStateBatches.
	StreamStateClass = "DriversetStreamState"
	// DStreamClass is the DStream job's (job/DriversetDStream.java), in the jar only where
	// Dist.HasDStreams: batch files checked by CheckValueBatches.
	DStreamClass = "DriversetDStream"
	// PyJobPath is the PySpark job in images that have PySpark (Dist.Python).
	PyJobPath = sparkHome + "/examples/src/main/python/driverset_pi.py"
	// PyStreamPath is the PySpark twin of StreamClass, beside PyJobPath.
	PyStreamPath = sparkHome + "/examples/src/main/python/driverset_stream.py"
	pythonPath   = sparkHome + "/python"
)

// ImageName is the name Spark version's image gets on the nodes.
func ImageName(version string) string { return "driverset.test/spark:" + version }

// Image is Spark d as a Spark image: the JRE, Spark at /opt/spark, the entrypoint at the path
// driverset expects of Spark images (contract.DefaultEntrypoint), and the job's jar; user spark
// (185), working in /opt/spark/work-dir.
func (d Dist) Image(job []byte) images.Image {
	img := images.Image{
		Name:       ImageName(d.Version),
		BaseLayers: []string{d.JRE, d.Layer},
		Files: []images.File{
			{Path: contract.DefaultEntrypoint, Mode: 0o755, Data: entrypoint},
			{Path: JobJarPath, Mode: 0o644, Data: job},
			// The layers below make /opt/spark; restating it keeps its mode.
			{Path: sparkHome, Mode: os.ModeDir | 0o755},
			{Path: sparkHome + "/examples", Mode: os.ModeDir | 0o755},
		},
		Entrypoint: []string{contract.DefaultEntrypoint},
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64",
			"SPARK_HOME=" + sparkHome,
			"SPARK_SCALA_VERSION=" + d.Scala,
		},
		User:       "185",
		WorkingDir: sparkHome + "/work-dir",
	}
	if d.Python != "" {
		// PySpark: its packages where PYTHONPATH finds them, for the driver's PythonRunner and
		// the executors' Python workers alike, and the PySpark job.
		img.BaseLayers = append(img.BaseLayers, d.Python)
		img.Env = append(img.Env, "PYTHONPATH="+pythonPath, "PYSPARK_PYTHON=python3")
		img.Files = append(img.Files,
			images.File{Path: PyJobPath, Mode: 0o644, Data: pyJob},
			images.File{Path: PyStreamPath, Mode: 0o644, Data: pyStreamJob})
	}
	return img
}
