package sparksim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/driverset/driverset/contract"
)

// DriverOptions tune StartDriverWith; zero values are the defaults.
type DriverOptions struct {
	// Version is the Spark line the JVM plays. Default: from the running pod's spark-version label
	// (set by 3.4+), else 2.4.
	Version Version
	// Rand and Now feed the random executor prefix and ConfigMap name (default crypto/rand, time.Now).
	Rand io.Reader
	Now  func() time.Time
	// PollInterval is spark.kubernetes.executor.apiPollingInterval (default 30 s).
	PollInterval time.Duration
}

// Driver is one driver JVM: started once in a pod, it keeps its conf, app id, executor prefix and
// executor counter for its lifetime, as Spark's driver does. A Driver is safe for concurrent use.
type Driver struct {
	c           kubernetes.Interface
	ns          string // spark.kubernetes.namespace
	version     Version
	t           traits
	conf        map[string]string
	env         map[string]string // the container's resolved env
	appID       string
	ownPod      *corev1.Pod
	prefix      string // executor pod name prefix
	confMap     string // the executor ConfigMap's name (3.x+), "" if none
	execWatch   watch.Interface
	stopPolling context.CancelFunc
	pollEvery   time.Duration
	localDirs   []string
	ids         ids
	mainClass   string // --class
	primary     string // the primary resource spark-submit runs
	appArgs     []string

	mu          sync.Mutex
	nextID      int
	confMapMade bool
}

// StartDriver is the driver JVM starting in pod ns/podName — the pod where the container runs,
// e.g. the bare driver pod, or a StatefulSet's pod. See StartDriverWith.
func StartDriver(ctx context.Context, c kubernetes.Interface, ns, podName string) (*Driver, error) {
	return StartDriverWith(ctx, c, ns, podName, DriverOptions{})
}

// StartDriverWith plays the start of the driver JVM (docs/spark-facts.md §3):
//  1. reads the driver container of pod ns/podName (the one named spark-kubernetes-driver, else
//     the first), resolves its env and $(VAR)s as the kubelet does and finds the arguments after
//     "driver" (see sparkArgs for the accepted wrapper shapes);
//  2. runs the entrypoint's `spark-submit --conf spark.driver.bindAddress=$SPARK_DRIVER_BIND_ADDRESS
//     [3.x+: --conf spark.executorEnv.SPARK_DRIVER_POD_IP=…] --deploy-mode client "$@"`;
//  3. builds the effective conf: the --properties-file (read from the ConfigMap mounted at its
//     directory), overridden by every --conf, overridden by spark-submit's own options (--name …);
//  4. GETs the pod named spark.kubernetes.driver.pod.name and fails with Spark's message if absent;
//  5. starts the scheduler backend (startBackend): (3.x+) waits up to 1 s for that pod to be
//     Ready, then opens the executor watch. The executor ConfigMap spark-exec-<id>-conf-map is
//     named here and created with the first executors (RequestExecutors).
//
// Not simulated: spark-defaults.conf, envFrom.
func StartDriverWith(ctx context.Context, c kubernetes.Interface, ns, podName string, o DriverOptions) (*Driver, error) {
	pod, err := c.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("sparksim: reading the pod the driver runs in: %w", err)
	}
	ctr := driverContainer(pod)
	if ctr == nil {
		return nil, fmt.Errorf("sparksim: pod %s/%s has no containers", ns, podName)
	}
	v := o.Version
	if v == "" {
		v = Spark24
		if got, ok := versionFromRelease(pod.Labels[LabelSparkVersion]); ok {
			v = got
		}
	}
	t, err := v.traits()
	if err != nil {
		return nil, err
	}
	d := &Driver{c: c, version: v, t: t, ids: ids{rand: o.Rand, now: o.Now}, pollEvery: o.PollInterval}
	if d.pollEvery <= 0 {
		d.pollEvery = defaultPollInterval
	}
	if def := (App{}).ids(); d.ids.rand == nil {
		d.ids.rand = def.rand
	}
	if d.ids.now == nil {
		d.ids.now = time.Now
	}
	d.env = containerEnv(ctx, c, pod, ctr)
	lookup := func(k string) (string, bool) { v, ok := d.env[k]; return v, ok }
	var argv []string
	for _, a := range append(append([]string{}, ctr.Command...), ctr.Args...) {
		argv = append(argv, expandVars(a, lookup))
	}
	if argv, err = wrapped(argv); err != nil {
		return nil, err
	}
	entry, rest, err := sparkArgs(argv)
	if err != nil {
		return nil, err
	}
	rest = append(rest, entryArgs(entry, d.env)...)
	bind := d.env["SPARK_DRIVER_BIND_ADDRESS"]
	cmdline := []string{"--conf", "spark.driver.bindAddress=" + bind}
	if !t.oldConfMap {
		cmdline = append(cmdline, "--conf", "spark.executorEnv.SPARK_DRIVER_POD_IP="+bind)
	}
	cmdline = append(append(cmdline, "--deploy-mode", "client"), rest...)
	args, err := parseSubmitArgs(cmdline)
	if err != nil {
		return nil, err
	}
	conf := map[string]string{}
	if args.propertiesFile != "" {
		if conf, err = readMountedFile(ctx, c, pod, ctr, args.propertiesFile); err != nil {
			return nil, err
		}
	}
	maps.Copy(conf, args.conf)
	maps.Copy(conf, args.flags)
	d.conf = conf
	d.mainClass, d.primary, d.appArgs = args.mainClass, args.primary, args.appArgs
	if d.usesDriverPodIP() {
		// SparkContext (4.1, SPARK-53944): on Kubernetes with useDriverPodIP the driver's host
		// becomes its bind address, whatever spark.driver.host said (a --conf included).
		conf["spark.driver.host"] = conf["spark.driver.bindAddress"]
	}

	d.ns = conf["spark.kubernetes.namespace"]
	if d.ns == "" {
		d.ns = ns
	}
	own := conf["spark.kubernetes.driver.pod.name"]
	if own == "" {
		return nil, errors.New("sparksim: spark.kubernetes.driver.pod.name is not set: the driver cannot find its own pod")
	}
	d.ownPod, err = c.CoreV1().Pods(d.ns).Get(ctx, own, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("No pod was found named %s in the cluster in the namespace %s (this was supposed to be the driver pod.).", own, d.ns)
	}
	if err != nil {
		return nil, err
	}
	d.appID = conf["spark.app.id"]
	if d.appID == "" {
		// SparkContext's own id when none was given (TaskScheduler.applicationId).
		d.appID = fmt.Sprintf("spark-application-%d", d.ids.now().UnixMilli())
	}
	if d.prefix = conf["spark.kubernetes.executor.podNamePrefix"]; d.prefix == "" {
		// KubernetesClusterManager sets a fresh prefix in every driver JVM that has none.
		name := conf["spark.app.name"]
		if name == "" {
			name = "spark"
		}
		if d.prefix, err = d.ids.resourcePrefix(Spark35, name); err != nil {
			return nil, err
		}
	}
	d.localDirs = localDirs(d.env, conf)
	if t.execConfigMap {
		id, err := d.ids.uniqueID()
		if err != nil {
			return nil, err
		}
		d.confMap = "spark-exec-" + id + "-conf-map"
	}
	if err := d.startBackend(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

func driverContainer(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == contract.DriverContainerName {
			return &pod.Spec.Containers[i]
		}
	}
	if len(pod.Spec.Containers) > 0 {
		return &pod.Spec.Containers[0]
	}
	return nil
}

// localDirs is LocalDirsFeatureStep's choice in the driver JVM: $SPARK_LOCAL_DIRS (the driver
// pod's own), else spark.local.dir, else one fresh /var/data/spark-<uuid>.
func localDirs(env, conf map[string]string) []string {
	s := env["SPARK_LOCAL_DIRS"]
	if s == "" {
		s = conf["spark.local.dir"]
	}
	var out []string
	for _, d := range strings.Split(s, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// readMountedFile reads the properties file at file from the ConfigMap volume mounted over its
// directory in ctr (plain configMap volumes and projected configMap sources, items honoured).
func readMountedFile(ctx context.Context, c kubernetes.Interface, pod *corev1.Pod, ctr *corev1.Container, file string) (map[string]string, error) {
	file = path.Clean(file)
	var mount *corev1.VolumeMount
	for i, m := range ctr.VolumeMounts {
		mp := path.Clean(m.MountPath)
		if strings.HasPrefix(file, mp+"/") && (mount == nil || len(mp) > len(path.Clean(mount.MountPath))) {
			mount = &ctr.VolumeMounts[i]
		}
	}
	if mount == nil {
		return nil, fmt.Errorf("sparksim: no volume is mounted over %s in container %s", file, ctr.Name)
	}
	rel := strings.TrimPrefix(file, path.Clean(mount.MountPath)+"/")
	if mount.SubPath != "" {
		rel = path.Join(mount.SubPath, rel)
	}
	var sources []*corev1.ConfigMapProjection
	for _, v := range pod.Spec.Volumes {
		if v.Name != mount.Name {
			continue
		}
		switch {
		case v.ConfigMap != nil:
			sources = append(sources, &corev1.ConfigMapProjection{LocalObjectReference: v.ConfigMap.LocalObjectReference, Items: v.ConfigMap.Items})
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					sources = append(sources, s.ConfigMap)
				}
			}
		}
	}
	for _, src := range sources {
		key, ok := rel, len(src.Items) == 0
		for _, it := range src.Items {
			if path.Clean(it.Path) == rel {
				key, ok = it.Key, true
			}
		}
		if !ok {
			continue
		}
		cm, err := c.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, src.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("sparksim: reading %s from ConfigMap %s: %w", file, src.Name, err)
		}
		text, ok := cm.Data[key]
		if !ok {
			continue
		}
		return loadProperties(text)
	}
	return nil, fmt.Errorf("sparksim: %s is not provided by any ConfigMap in volume %s", file, mount.Name)
}

// Conf returns a copy of the effective conf.
func (d *Driver) Conf() map[string]string { return maps.Clone(d.conf) }

// MainClass and Primary are what the in-pod spark-submit runs: the --class and the primary
// resource (for a 2.4 PySpark or R driver, the file its entrypoint appended from the env).
func (d *Driver) MainClass() string { return d.mainClass }

// Primary is the primary resource; see MainClass.
func (d *Driver) Primary() string { return d.primary }

// AppArgs are the application's arguments, after the primary resource.
func (d *Driver) AppArgs() []string { return slices.Clone(d.appArgs) }

// AppID is spark.app.id as the driver sees it.
func (d *Driver) AppID() string { return d.appID }

// OwnPod is the pod named by spark.kubernetes.driver.pod.name, as read at start.
func (d *Driver) OwnPod() *corev1.Pod { return d.ownPod.DeepCopy() }

// ExecutorPrefix is this JVM's executor pod name prefix.
func (d *Driver) ExecutorPrefix() string { return d.prefix }

// ExecutorConfigMap is the name of the ConfigMap this JVM created for its executors ("" in 2.4).
func (d *Driver) ExecutorConfigMap() string { return d.confMap }
