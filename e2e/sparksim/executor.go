package sparksim

import (
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// DefaultResourceProfileID is the id of Spark's default resource profile.
const DefaultResourceProfileID = "0"

var (
	leadingNonWord = regexp.MustCompile(`^[^\w]+`)
	nonHostname    = regexp.MustCompile(`[^\w-]+`)
)

// ExecutorPod is executor id's pod as this driver would create it, not created: what a benchmark
// sends the apiserver itself.
func (d *Driver) ExecutorPod(id int) (*corev1.Pod, error) { return d.executorPod(id) }

// executorPod builds executor id's pod as BasicExecutorFeatureStep and LocalDirsFeatureStep do.
func (d *Driver) executorPod(id int) (*corev1.Pod, error) {
	t, conf := d.t, d.conf
	execID := strconv.Itoa(id)
	name := fmt.Sprintf("%s-exec-%d", d.prefix, id)
	// The hostname is the name's last 63 characters made a valid hostname.
	hostname := name[max(0, len(name)-63):]
	hostname = nonHostname.ReplaceAllString(leadingNonWord.ReplaceAllString(hostname, ""), "_")

	custom := prefixed(conf, "spark.kubernetes.executor.label.")
	annotations := prefixed(conf, "spark.kubernetes.executor.annotation.")
	preset := map[string]string{
		LabelExecID:                    execID,
		contract.LabelSparkAppSelector: d.appID,
		contract.LabelSparkRole:        contract.RoleExecutor,
	}
	if t.resourceProfiles {
		preset[LabelResourceProfile] = DefaultResourceProfileID
	}
	if t.versionLabels {
		preset[LabelSparkVersion] = t.release
		preset[LabelSparkAppName] = appNameLabel(conf["spark.app.name"])
	}
	if !t.oldConfMap {
		custom = substituteIDs(custom, d.appID, execID)
		annotations = substituteIDs(annotations, d.appID, execID)
	}
	for k := range preset {
		if _, ok := custom[k]; ok {
			return nil, fmt.Errorf("sparksim: requirement failed: Custom executor labels cannot contain %s as it is reserved for Spark.", k)
		}
	}
	podLabels := maps.Clone(custom)
	maps.Copy(podLabels, preset)
	if len(annotations) == 0 {
		annotations = nil
	}

	// Resources.
	memMiB := int64(1024)
	memString := "1g"
	if v, ok := conf["spark.executor.memory"]; ok {
		m, err := memoryMiB(v)
		if err != nil {
			return nil, err
		}
		memMiB, memString = m, v
	}
	if !t.oldConfMap {
		memString = strconv.FormatInt(memMiB, 10) + "m"
	}
	overhead, err := overheadMiB(conf, "executor", memMiB, t)
	if err != nil {
		return nil, err
	}
	cores := conf["spark.executor.cores"]
	if cores == "" {
		cores = "1"
	}
	cpuRequest := cores
	if v, ok := conf["spark.kubernetes.executor.request.cores"]; ok {
		cpuRequest = v
	}
	cpuQ, err := resource.ParseQuantity(cpuRequest)
	if err != nil {
		return nil, fmt.Errorf("sparksim: executor cpu %q: %w", cpuRequest, err)
	}
	memQ := resource.MustParse(strconv.FormatInt(memMiB+overhead, 10) + "Mi")
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: memQ, corev1.ResourceCPU: cpuQ},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: memQ},
	}
	if v, ok := conf["spark.kubernetes.executor.limit.cores"]; ok {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("sparksim: executor cpu limit %q: %w", v, err)
		}
		res.Limits[corev1.ResourceCPU] = q
	}

	// Env, in BasicExecutorFeatureStep's order, then LocalDirsFeatureStep's.
	env := []corev1.EnvVar{
		{Name: contract.EnvDriverURL, Value: d.driverURL()},
		{Name: "SPARK_EXECUTOR_CORES", Value: cores},
		{Name: "SPARK_EXECUTOR_MEMORY", Value: memString},
		{Name: "SPARK_APPLICATION_ID", Value: d.appID},
		{Name: "SPARK_CONF_DIR", Value: SparkConfDir},
		{Name: "SPARK_EXECUTOR_ID", Value: execID},
	}
	if t.resourceProfiles {
		env = append(env, corev1.EnvVar{Name: "SPARK_RESOURCE_PROFILE_ID", Value: DefaultResourceProfileID})
	}
	execEnv := prefixed(conf, "spark.executorEnv.")
	for _, k := range sortedKeys(execEnv) {
		env = append(env, corev1.EnvVar{Name: k, Value: execEnv[k]})
	}
	env = append(env, corev1.EnvVar{Name: "SPARK_EXECUTOR_POD_IP", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}})
	if !t.oldConfMap {
		env = append(env, corev1.EnvVar{Name: "SPARK_EXECUTOR_POD_NAME", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}})
	}
	for i, opt := range d.javaOpts() {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("SPARK_JAVA_OPT_%d", i), Value: opt})
	}

	// Local dirs: the driver JVM's own (LocalDirsFeatureStep reads SPARK_LOCAL_DIRS from its env).
	dirs := d.localDirs
	if len(dirs) == 0 {
		u, err := d.ids.uuid()
		if err != nil {
			return nil, err
		}
		dirs = []string{"/var/data/spark-" + u}
	}
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	for i, dir := range dirs {
		v := fmt.Sprintf("spark-local-dir-%d", i+1)
		volumes = append(volumes, corev1.Volume{Name: v, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		mounts = append(mounts, corev1.VolumeMount{Name: v, MountPath: dir})
	}
	env = append(env, corev1.EnvVar{Name: "SPARK_LOCAL_DIRS", Value: strings.Join(dirs, ",")})
	if d.confMap != "" {
		volumes = append(volumes, corev1.Volume{Name: "spark-conf-volume-exec", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: d.confMap}}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "spark-conf-volume-exec", MountPath: SparkConfDir})
	}

	containerName := "spark-kubernetes-executor"
	if t.oldConfMap {
		containerName = "executor"
	}
	image := conf["spark.kubernetes.executor.container.image"]
	if image == "" {
		image = conf["spark.kubernetes.container.image"]
	}
	pullPolicy := conf["spark.kubernetes.container.image.pullPolicy"]
	if pullPolicy == "" {
		pullPolicy = string(corev1.PullIfNotPresent)
	}
	bmPort := int32(BlockManagerPort)
	if v, ok := conf["spark.blockManager.port"]; ok {
		p, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("sparksim: spark.blockManager.port %q: %w", v, err)
		}
		bmPort = int32(p)
	}
	var ports []corev1.ContainerPort
	if bmPort != 0 {
		ports = []corev1.ContainerPort{{Name: PortNameBlockManager, ContainerPort: bmPort, Protocol: corev1.ProtocolTCP}}
	}
	nodeSelector := prefixed(conf, "spark.kubernetes.node.selector.")
	if !t.oldConfMap {
		maps.Copy(nodeSelector, prefixed(conf, "spark.kubernetes.executor.node.selector."))
	}
	if len(nodeSelector) == 0 {
		nodeSelector = nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: d.ns, Labels: podLabels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{ownerReference(d.ownPod)},
		},
		Spec: corev1.PodSpec{
			Hostname:           hostname,
			RestartPolicy:      corev1.RestartPolicyNever,
			NodeSelector:       nodeSelector,
			ImagePullSecrets:   pullSecrets(conf),
			ServiceAccountName: conf["spark.kubernetes.authenticate.executor.serviceAccountName"],
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           image,
				ImagePullPolicy: corev1.PullPolicy(pullPolicy),
				Args:            []string{"executor"},
				Env:             env,
				Ports:           ports,
				Resources:       res,
				VolumeMounts:    mounts,
			}},
			Volumes: volumes,
		},
	}, nil
}

// driverURL is the RpcEndpointAddress executors dial (BasicExecutorFeatureStep): spark.driver.host
// and spark.driver.port, or on 4.1 with spark.kubernetes.executor.useDriverPodIP
// spark.driver.bindAddress, the pod IP of the container the JVM runs in.
func (d *Driver) driverURL() string {
	host := d.conf["spark.driver.host"]
	if d.usesDriverPodIP() {
		host = d.conf["spark.driver.bindAddress"]
	}
	if host == "" {
		host = d.conf["spark.driver.bindAddress"]
	}
	port := d.conf["spark.driver.port"]
	if port == "" {
		port = strconv.Itoa(DriverPort)
	}
	return fmt.Sprintf("spark://CoarseGrainedScheduler@%s:%s", host, port)
}

// usesDriverPodIP is spark.kubernetes.executor.useDriverPodIP (4.1+; off by default).
func (d *Driver) usesDriverPodIP() bool {
	return d.t.driverPodIPOption && d.conf["spark.kubernetes.executor.useDriverPodIP"] == "true"
}

// javaOpts are the executor's SPARK_JAVA_OPT_n: spark.executor.extraJavaOptions (split on
// whitespace), then -Dk=v for each setting an executor needs at startup
// (SparkConf.isExecutorStartupConf: spark.auth*, spark.rpc*, spark.network*, 4.x spark.ssl* but
// passwords, spark.port.*, *.port), in key order.
func (d *Driver) javaOpts() []string {
	var out []string
	if v := d.conf["spark.executor.extraJavaOptions"]; v != "" {
		out = append(out, strings.Fields(strings.ReplaceAll(v, "{{APP_ID}}", d.appID))...)
	}
	for _, k := range sortedKeys(d.conf) {
		startup := (strings.HasPrefix(k, "spark.auth") && k != "spark.authenticate.secret") ||
			strings.HasPrefix(k, "spark.rpc") || strings.HasPrefix(k, "spark.network") ||
			(d.t.sslStartupConf && strings.HasPrefix(k, "spark.ssl") && !strings.Contains(k, "Password")) ||
			strings.HasPrefix(k, "spark.port.") || (strings.HasPrefix(k, "spark.") && strings.HasSuffix(k, ".port"))
		if startup {
			out = append(out, "-D"+k+"="+d.conf[k])
		}
	}
	return out
}
