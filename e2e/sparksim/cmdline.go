package sparksim

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/driverset/driverset/wrap"
)

// expandVars is the kubelet's $(VAR) expansion of command, args and env values
// (third_party/forked/golang/expansion): $(NAME) becomes the value of NAME when it is defined,
// $$ becomes $, and anything else — an undefined name, an unclosed "$(", a lone "$" — stays as
// written.
func expandVars(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok && name != "" {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// containerEnv resolves a container's env as the kubelet does, in order, each literal value
// expanded against the variables defined before it. Supported sources: literal values, fieldRef
// (metadata.name, metadata.namespace, metadata.uid, metadata.labels['k'], metadata.annotations['k'],
// spec.nodeName, spec.serviceAccountName, status.podIP, status.hostIP) and configMapKeyRef /
// secretKeyRef (read from the API). A variable whose source is unknown or missing stays undefined,
// so a $(REF) to it stays literal. envFrom is not read.
func containerEnv(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod, ctr *corev1.Container) map[string]string {
	env := map[string]string{}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, e := range ctr.Env {
		if e.ValueFrom == nil {
			env[e.Name] = expandVars(e.Value, lookup)
			continue
		}
		if v, ok := envSource(ctx, c, pod, e.ValueFrom); ok {
			env[e.Name] = v
		}
	}
	return env
}

func envSource(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod, src *corev1.EnvVarSource) (string, bool) {
	switch {
	case src.FieldRef != nil:
		return podField(pod, src.FieldRef.FieldPath)
	case src.ConfigMapKeyRef != nil:
		cm, err := c.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, src.ConfigMapKeyRef.Name, metav1.GetOptions{})
		if err != nil {
			return "", false
		}
		v, ok := cm.Data[src.ConfigMapKeyRef.Key]
		return v, ok
	case src.SecretKeyRef != nil:
		s, err := c.CoreV1().Secrets(pod.Namespace).Get(ctx, src.SecretKeyRef.Name, metav1.GetOptions{})
		if err != nil {
			return "", false
		}
		v, ok := s.Data[src.SecretKeyRef.Key]
		return string(v), ok
	}
	return "", false
}

func podField(pod *corev1.Pod, path string) (string, bool) {
	switch path {
	case "metadata.name":
		return pod.Name, true
	case "metadata.namespace":
		return pod.Namespace, true
	case "metadata.uid":
		return string(pod.UID), true
	case "spec.nodeName":
		return pod.Spec.NodeName, true
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, true
	case "status.podIP":
		return pod.Status.PodIP, true
	case "status.hostIP":
		return pod.Status.HostIP, true
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if rest, ok := strings.CutPrefix(path, prefix+"['"); ok && strings.HasSuffix(rest, "']") {
			return m[strings.TrimSuffix(rest, "']")], true
		}
	}
	return "", false
}

// wrapped is what runs of argv: when it is `driverset wrap …`, the command wrap itself would run
// (wrap.DriverCommand: the incarnation's own app id); otherwise argv. wrap's own code decides, so
// that the imitation starts what the real container starts.
func wrapped(argv []string) ([]string, error) {
	o, isWrap, err := wrap.CommandOptions(argv)
	if !isWrap {
		return argv, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sparksim: %w", err)
	}
	cmd, err := o.DriverCommand()
	if err != nil {
		return nil, fmt.Errorf("sparksim: driverset wrap would not start the driver: %w", err)
	}
	return append(argv[:len(argv)-len(o.Command)], cmd...), nil
}

// sparkArgs finds the entry command ("driver", or 2.4's "driver-py" / "driver-r") and the
// arguments the image's entrypoint receives after it, in the container's full argv (command +
// args, both $(VAR)-expanded). Accepted shapes, tried in order:
//   - argv starts with the entry: no command, the image ENTRYPOINT runs (Spark's own pods);
//   - argv is an entrypoint followed by the entry: [/opt/entrypoint.sh driver …];
//   - a wrapper ending in "--" comes first: everything up to and including the first "--" is
//     dropped and the rest must have one of the two shapes above, e.g.
//     [/opt/driverset/bin/driverset wrap -- /opt/entrypoint.sh driver …] or [tini -s -- /opt/entrypoint.sh driver …].
func sparkArgs(argv []string) (string, []string, error) {
	isEntry := func(a string) bool { return a == "driver" || a == entryDriverPy || a == entryDriverR }
	afterDriver := func(a []string) (string, []string, bool) {
		switch {
		case len(a) > 0 && isEntry(a[0]):
			return a[0], a[1:], true
		case len(a) > 1 && isEntry(a[1]):
			return a[1], a[2:], true
		}
		return "", nil, false
	}
	if entry, rest, ok := afterDriver(argv); ok {
		return entry, rest, nil
	}
	for i, a := range argv {
		if a == "--" {
			if entry, rest, ok := afterDriver(argv[i+1:]); ok {
				return entry, rest, nil
			}
			break
		}
	}
	return "", nil, fmt.Errorf("sparksim: container command line %q does not run the Spark entrypoint with \"driver\"", argv)
}

// entryArgs is what Spark 2.4's entrypoint appends after "$@" for its PySpark and R entries:
// `$PYSPARK_PRIMARY $PYSPARK_ARGS` / `$R_PRIMARY $R_ARGS`, unquoted, so split on blanks. Its
// PYSPARK_ARGS / R_ARGS are PYSPARK_APP_ARGS / R_APP_ARGS when set.
func entryArgs(entry string, env map[string]string) []string {
	switch entry {
	case entryDriverPy:
		return strings.Fields(env["PYSPARK_PRIMARY"] + " " + env["PYSPARK_APP_ARGS"])
	case entryDriverR:
		return strings.Fields(env["R_PRIMARY"] + " " + env["R_APP_ARGS"])
	}
	return nil
}

// submitArgs is what SparkSubmitArguments makes of a client-mode command line.
type submitArgs struct {
	conf           map[string]string // --conf k=v, later ones winning
	flags          map[string]string // spark-submit options that map to a setting (--name → spark.app.name …)
	propertiesFile string
	mainClass      string
	primary        string
	appArgs        []string
}

// flagSetting is the Spark setting a spark-submit option sets ("" for none); such an option beats
// --conf.
func flagSetting(option string) string {
	switch option {
	case "--name":
		return "spark.app.name"
	case "--master":
		return "spark.master"
	case "--deploy-mode":
		return "spark.submit.deployMode"
	case "--jars":
		return "spark.jars"
	case "--files":
		return "spark.files"
	case "--py-files":
		return "spark.submit.pyFiles"
	case "--driver-memory":
		return "spark.driver.memory"
	case "--driver-cores":
		return "spark.driver.cores"
	case "--executor-memory":
		return "spark.executor.memory"
	case "--executor-cores":
		return "spark.executor.cores"
	case "--num-executors":
		return "spark.executor.instances"
	case "--proxy-user":
		return "spark.kubernetes.proxyUser"
	}
	return ""
}

// takesValue reports whether a spark-submit option takes a value (all but switches such as
// --verbose or --supervise), whether or not the simulator reads it.
func takesValue(option string) bool {
	switch option {
	case "--conf", "--properties-file", "--class",
		"--packages", "--exclude-packages", "--repositories", "--archives",
		"--driver-java-options", "--driver-library-path", "--driver-class-path",
		"--total-executor-cores", "--queue", "--principal", "--keytab", "--kill", "--status":
		return true
	}
	return flagSetting(option) != ""
}

// parseSubmitArgs parses spark-submit's command line: options until the primary resource, then
// the application's arguments. Both "--opt value" and "--opt=value" forms are accepted.
func parseSubmitArgs(args []string) (submitArgs, error) {
	s := submitArgs{conf: map[string]string{}, flags: map[string]string{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			s.primary, s.appArgs = a, args[i+1:]
			break
		}
		name, value, inline := strings.Cut(a, "=")
		if name == "-c" {
			name = "--conf"
		}
		if !takesValue(name) {
			continue // a switch such as --verbose or --supervise
		}
		if !inline {
			if i+1 >= len(args) {
				return s, fmt.Errorf("sparksim: missing value for %s", name)
			}
			i++
			value = args[i]
		}
		switch {
		case name == "--conf":
			k, v, ok := strings.Cut(value, "=")
			if !ok {
				return s, fmt.Errorf("sparksim: Spark config without '=': %s", value)
			}
			s.conf[k] = v
		case name == "--properties-file":
			s.propertiesFile = value
		case name == "--class":
			s.mainClass = value
		case flagSetting(name) != "":
			s.flags[flagSetting(name)] = value
		}
	}
	return s, nil
}
