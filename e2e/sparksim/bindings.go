package sparksim

import (
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// language is what an App's main resource is written in. It decides the main class
// spark-submit gives the driver, the resource type it records and, in 2.4, how the file reaches
// the driver (its language-binding feature step).
type language int

const (
	langJVM language = iota
	langPython
	langR
)

func (a App) language() language {
	switch {
	case a.PyFile != "":
		return langPython
	case a.RFile != "":
		return langR
	}
	return langJVM
}

// resourceType is spark.kubernetes.resource.type, which each binding step records.
func (l language) resourceType() string {
	switch l {
	case langPython:
		return "python"
	case langR:
		return "r"
	}
	return "java"
}

// Spark 2.4's settings for a non-JVM application (Config.scala).
const (
	confPyMainResource   = "spark.kubernetes.python.mainAppResource"
	confRMainResource    = "spark.kubernetes.r.mainAppResource"
	confPyFiles          = "spark.kubernetes.python.pyFiles"
	confPythonVersion    = "spark.kubernetes.pyspark.pythonVersion"
	confOverheadFactor   = "spark.kubernetes.memoryOverheadFactor"
	defaultPythonVersion = "2"   // 2.4's default; 3.0 made it 3
	nonJVMOverhead       = "0.4" // the overhead factor of a non-JVM app unless one is set
	envPyPrimary         = "PYSPARK_PRIMARY"
	envPyArgs            = "PYSPARK_APP_ARGS"
	envPyFiles           = "PYSPARK_FILES"
	envPyMajorVersion    = "PYSPARK_MAJOR_PYTHON_VERSION"
	envRPrimary          = "R_PRIMARY"
	envRArgs             = "R_APP_ARGS"
)

// nonJVMConf24 is what 2.4's KubernetesConf.createDriverConf adds to the conf of a PySpark or
// SparkR app: the main file under its own key, and the larger overhead factor unless one is set.
func nonJVMConf24(c map[string]string, a App) {
	switch a.language() {
	case langPython:
		c[confPyMainResource] = a.PyFile
	case langR:
		c[confRMainResource] = a.RFile
	default:
		return
	}
	if _, ok := c[confOverheadFactor]; !ok {
		c[confOverheadFactor] = nonJVMOverhead
	}
}

// bindingStep24 is 2.4's PythonDriverFeatureStep / RDriverFeatureStep: the driver container's
// args — its own entry command, then only the properties file and the runner class — and the env
// that carries the file (a local:// one as its bare path) and the application's arguments
// (joined by blanks), which the image's entrypoint appends after "$@". A JVM app has none
// (nil, nil): JavaDriverFeatureStep's args are the driver's usual ones.
func bindingStep24(a App, conf map[string]string) (args []string, env []corev1.EnvVar) {
	add := func(k, v string) { env = append(env, corev1.EnvVar{Name: k, Value: v}) }
	joined := strings.Join(a.AppArgs, " ")
	switch a.language() {
	case langPython:
		args = []string{entryDriverPy}
		add(envPyPrimary, resolveFileURI(a.PyFile))
		version := conf[confPythonVersion]
		if version == "" {
			version = defaultPythonVersion
		}
		add(envPyMajorVersion, version)
		if joined != "" {
			add(envPyArgs, joined)
		}
		// spark-submit always sets the key ("" without --py-files), so the variable is always
		// there; the entrypoint adds it to PYTHONPATH when not empty.
		if files, set := conf[confPyFiles]; set {
			var paths []string
			for _, f := range strings.Split(files, ",") {
				paths = append(paths, resolveFileURI(f))
			}
			add(envPyFiles, strings.Join(paths, ":"))
		}
	case langR:
		args = []string{entryDriverR}
		add(envRPrimary, resolveFileURI(a.RFile))
		if joined != "" {
			add(envRArgs, joined)
		}
	default:
		return nil, nil
	}
	return append(args, "--properties-file", SparkConfPath, "--class", a.mainClass()), env
}

// resolveFileURI is 2.4's KubernetesUtils.resolveFileUri: a local:// URI names a file already in
// the image and becomes its path; any other (file:, https:, hdfs:, a bare path) is kept as written.
func resolveFileURI(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "local" {
		return uri
	}
	return u.Path
}
