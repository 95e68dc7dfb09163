package spark

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
)

// App is one submission of the job in cluster mode.
type App struct {
	Dist      Dist
	Master    string // the apiserver's URL, https://host:port
	Namespace string
	Name      string            // --name: Spark derives the driver pod's name from it
	Conf      map[string]string // --conf, written in key order
	Args      []string          // the job's arguments: slices, milliseconds per slice
	Python    bool              // submit the PySpark job (PyJobPath) instead of the JVM one
	// Class is the JVM job's main class, JobClass when "" (StreamClass, StreamStateClass).
	Class string
	// PyFile is the PySpark job's path in the image, PyJobPath when "" (PyStreamPath).
	PyFile string
}

// SubmitArgs is the spark-submit command line for a, after "spark-submit".
func (a App) SubmitArgs() []string {
	args := []string{
		"--master", "k8s://" + a.Master,
		"--deploy-mode", "cluster",
		"--name", a.Name,
	}
	primary := "local://" + JobJarPath
	if a.Python {
		primary = "local://" + cmp.Or(a.PyFile, PyJobPath)
	} else {
		args = append(args, "--class", cmp.Or(a.Class, JobClass))
	}
	args = append(args,
		"--conf", "spark.kubernetes.namespace="+a.Namespace,
		"--conf", "spark.kubernetes.container.image="+ImageName(a.Dist.Version),
		// No registry here: the image is on every node already.
		"--conf", "spark.kubernetes.container.image.pullPolicy=Never",
	)
	for _, k := range slices.Sorted(maps.Keys(a.Conf)) {
		args = append(args, "--conf", k+"="+a.Conf[k])
	}
	return append(append(args, primary), a.Args...)
}

// SparkSubmit runs the real spark-submit of d on the host with args, as bin/spark-submit does:
// Spark's launcher builds the JVM's command line, then that JVM runs SparkSubmit. kubeconfig
// gives it the cluster's credentials (fabric8's client reads KUBECONFIG). Its output goes to
// out; it returns spark-submit's exit code. An error means it could not be run at all.
func SparkSubmit(ctx context.Context, d Dist, kubeconfig string, out io.Writer, args ...string) (int, error) {
	env := append(os.Environ(),
		"SPARK_HOME="+d.Home,
		"SPARK_SCALA_VERSION="+d.Scala,
		"KUBECONFIG="+kubeconfig,
		// A short-lived client JVM: start fast on a small machine.
		"SPARK_SUBMIT_OPTS=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
	)
	launcher := exec.CommandContext(ctx, "java", append([]string{"-Xmx128m", "-cp", filepath.Join(d.Home, "jars", "*"),
		"org.apache.spark.launcher.Main", "org.apache.spark.deploy.SparkSubmit"}, args...)...)
	launcher.Env = env
	var stderr bytes.Buffer
	launcher.Stderr = &stderr
	line, err := launcher.Output()
	if err != nil {
		return 0, fmt.Errorf("spark: Spark's launcher: %w\n%s", err, stderr.Bytes())
	}
	words, messages, err := launcherCommand(line)
	if err != nil {
		return 0, err
	}
	_, _ = out.Write(messages)
	cmd := exec.CommandContext(ctx, words[0], words[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() >= 0 {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("spark: spark-submit: %w", err)
	}
	return 0, nil
}

// launcherCommand reads what Spark's launcher prints (bin/spark-class reads it the same way):
// messages for the user, then a line holding only NUL that starts the command, then the
// command's words, each ended by NUL.
func launcherCommand(b []byte) (words []string, messages []byte, err error) {
	messages, cmd, ok := bytes.Cut(b, []byte("\x00\n"))
	if !ok && bytes.HasPrefix(b, []byte("\x00")) { // no messages before the start flag
		messages, cmd, ok = nil, b[1:], true
	}
	if !ok {
		return nil, b, fmt.Errorf("spark: Spark's launcher printed no command:\n%s", b)
	}
	for w := range bytes.SplitSeq(bytes.TrimSuffix(cmd, []byte{0}), []byte{0}) {
		words = append(words, string(w))
	}
	if len(words) == 0 || words[0] == "" {
		return nil, messages, fmt.Errorf("spark: Spark's launcher printed an empty command")
	}
	return words, messages, nil
}
