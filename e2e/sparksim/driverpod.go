package sparksim

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/driverset/driverset/contract"
)

// Names and numbers Spark hard-codes (deploy/k8s/Constants.scala).
const (
	DriverPort       = 7078
	BlockManagerPort = 7079
	UIPort           = 4040
	// ConnectPort is Spark Connect's default gRPC port, on the 4.1 driver Service.
	ConnectPort = 15002

	PortNameDriverRPC    = "driver-rpc-port"
	PortNameBlockManager = "blockmanager"
	PortNameUI           = "spark-ui"
	PortNameConnect      = "spark-connect"

	// SparkConfDir is where the properties ConfigMap is mounted; SparkConfPath the file.
	SparkConfDir  = "/opt/spark/conf"
	SparkConfFile = "spark.properties"
	SparkConfPath = SparkConfDir + "/" + SparkConfFile

	LabelSparkVersion    = "spark-version"
	LabelSparkAppName    = "spark-app-name"
	LabelExecID          = "spark-exec-id"
	LabelResourceProfile = "spark-exec-resourceprofile-id"

	localDirVolume = "spark-local-dir-1"
	// Spark 2.4's entrypoint commands for PySpark and R drivers (3.0 merged them into "driver").
	entryDriverPy = "driver-py"
	entryDriverR  = "driver-r"
	// maxServiceName is the longest driver Service name Spark uses before it falls back to a
	// random one (KUBERNETES_LABEL_MAX_LENGTH / DNS label).
	maxServiceName = 63
)

// serviceName is DriverServiceFeatureStep's name: "<prefix>-driver-svc", or when that is longer
// than 63 characters "spark-<uniqueID>-driver-svc" (2.4: "spark-<millis>-driver-svc").
func serviceName(g ids, t traits, prefix string) (string, error) {
	if n := prefix + "-driver-svc"; len(n) <= maxServiceName {
		return n, nil
	}
	if t.oldConfMap {
		return fmt.Sprintf("spark-%d-driver-svc", g.now().UnixMilli()), nil
	}
	id, err := g.uniqueID()
	if err != nil {
		return "", err
	}
	return "spark-" + id + "-driver-svc", nil
}

// driverBuilder plays KubernetesDriverBuilder's feature steps (Basic, Service, Command, LocalDirs)
// and Client.run's ConfigMap mount, for one plan.
type driverBuilder struct {
	app      App
	t        traits
	conf     map[string]string
	plan     *Plan
	localDir string
}

// prefixed returns the settings under prefix with the prefix removed
// (KubernetesUtils.parsePrefixedKeyValuePairs).
func prefixed(conf map[string]string, prefix string) map[string]string {
	out := map[string]string{}
	for k, v := range conf {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			out[rest] = v
		}
	}
	return out
}

// substituteIDs is Utils.substituteAppNExecIds (3.x+): {{APP_ID}} and {{EXECUTOR_ID}} in values.
func substituteIDs(m map[string]string, appID, execID string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = strings.ReplaceAll(strings.ReplaceAll(v, "{{APP_ID}}", appID), "{{EXECUTOR_ID}}", execID)
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}

// driverLabels is KubernetesDriverConf.labels: the user's labels plus Spark's preset ones, which
// the user may not set.
func (b driverBuilder) driverLabels() (map[string]string, error) {
	custom := prefixed(b.conf, "spark.kubernetes.driver.label.")
	preset := map[string]string{
		contract.LabelSparkAppSelector: b.plan.AppID,
		contract.LabelSparkRole:        contract.RoleDriver,
	}
	if b.t.versionLabels {
		custom = substituteIDs(custom, b.plan.AppID, "")
		preset[LabelSparkVersion] = b.t.release
		preset[LabelSparkAppName] = appNameLabel(b.conf["spark.app.name"])
	}
	for k := range preset {
		if _, ok := custom[k]; ok {
			return nil, fmt.Errorf("sparksim: requirement failed: Label with key %s is not allowed as it is reserved for Spark bookkeeping operations.", k)
		}
	}
	maps.Copy(custom, preset)
	return custom, nil
}

func (b driverBuilder) build(now time.Time) error {
	p, conf, t := b.plan, b.conf, b.t
	labels, err := b.driverLabels()
	if err != nil {
		return err
	}
	annotations := prefixed(conf, "spark.kubernetes.driver.annotation.")
	if !t.oldConfMap {
		annotations = substituteIDs(annotations, p.AppID, "")
	}

	// Resources (BasicDriverFeatureStep).
	memMiB := int64(1024)
	if v, ok := conf["spark.driver.memory"]; ok {
		if memMiB, err = memoryMiB(v); err != nil {
			return err
		}
	}
	overhead, err := overheadMiB(conf, "driver", memMiB, t)
	if err != nil {
		return err
	}
	cores := conf["spark.driver.cores"]
	if cores == "" {
		cores = "1"
	}
	cpuRequest := cores
	if v, ok := conf["spark.kubernetes.driver.request.cores"]; ok && !t.oldConfMap {
		cpuRequest = v
	}
	cpuQ, err := resource.ParseQuantity(cpuRequest)
	if err != nil {
		return fmt.Errorf("sparksim: driver cpu %q: %w", cpuRequest, err)
	}
	memQ := resource.MustParse(strconv.FormatInt(memMiB+overhead, 10) + "Mi")
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: cpuQ, corev1.ResourceMemory: memQ},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: memQ},
	}
	if v, ok := conf["spark.kubernetes.driver.limit.cores"]; ok {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return fmt.Errorf("sparksim: driver cpu limit %q: %w", v, err)
		}
		res.Limits[corev1.ResourceCPU] = q
	}

	// Properties: the SparkConf plus what each feature step adds (getAdditionalPodSystemProperties).
	host := fmt.Sprintf("%s.%s.svc", p.ServiceName, conf["spark.kubernetes.namespace"])
	props := maps.Clone(conf)
	props["spark.kubernetes.driver.pod.name"] = p.DriverPodName
	props["spark.app.id"] = p.AppID
	props["spark.kubernetes.submitInDriver"] = "true"
	props["spark.driver.host"] = host
	props["spark.driver.port"] = strconv.Itoa(DriverPort)
	props["spark.driver.blockManager.port"] = strconv.Itoa(BlockManagerPort)
	props["spark.kubernetes.resource.type"] = b.app.language().resourceType()
	if t.fixedExecutorPrefix {
		props["spark.kubernetes.executor.podNamePrefix"] = p.Prefix
	} else {
		props["spark.kubernetes.memoryOverheadFactor"] = "0.1"
		props["spark.app.submitTime"] = strconv.FormatInt(now.UnixMilli(), 10)
	}
	p.Properties = props

	// Container (Basic + Command + LocalDirs features, then Client.run's conf mount).
	var env []corev1.EnvVar
	if !t.oldConfMap {
		user := b.app.User
		if user == "" {
			user = DefaultUser
		}
		env = append(env, corev1.EnvVar{Name: "SPARK_USER", Value: user},
			corev1.EnvVar{Name: "SPARK_APPLICATION_ID", Value: p.AppID})
	}
	driverEnv := prefixed(conf, "spark.kubernetes.driverEnv.")
	for _, k := range sortedKeys(driverEnv) {
		env = append(env, corev1.EnvVar{Name: k, Value: driverEnv[k]})
	}
	env = append(env,
		corev1.EnvVar{Name: "SPARK_DRIVER_BIND_ADDRESS", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
		corev1.EnvVar{Name: "SPARK_LOCAL_DIRS", Value: b.localDir},
	)

	args := []string{"driver"}
	if b.app.ProxyUser != "" && !t.oldConfMap {
		args = append(args, "--proxy-user", b.app.ProxyUser)
	}
	switch primary := b.app.resource(); {
	case t.oldConfMap && b.app.language() != langJVM:
		// 2.4's PySpark or R binding step: its own entry, the file and the arguments in the env.
		var bindEnv []corev1.EnvVar
		args, bindEnv = bindingStep24(b.app, conf)
		env = append(env, bindEnv...)
	case t.oldConfMap:
		// 2.4's JavaDriverFeatureStep: the jar travels in spark.jars, the argument is a marker.
		args = append(args, "--properties-file", SparkConfPath, "--class", b.app.mainClass(), "spark-internal")
		args = append(args, b.app.AppArgs...)
	default:
		// 3.0+: every language starts with "driver" (SPARK-25875), PySpark with PythonRunner.
		args = append(args, "--properties-file", SparkConfPath, "--class", b.app.mainClass(), primary)
		args = append(args, b.app.AppArgs...)
	}
	// Client.run adds the conf directory after every feature step.
	env = append(env, corev1.EnvVar{Name: "SPARK_CONF_DIR", Value: SparkConfDir})

	confVolume := "spark-conf-volume-driver"
	cmSource := &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: p.ConfigMapName},
		Items:                []corev1.KeyToPath{{Key: SparkConfFile, Path: SparkConfFile, Mode: ptr.To[int32](0o644)}},
	}
	if t.oldConfMap {
		confVolume = "spark-conf-volume"
		cmSource.Items = nil
	}
	image := conf["spark.kubernetes.driver.container.image"]
	if image == "" {
		image = conf["spark.kubernetes.container.image"]
	}
	pullPolicy := conf["spark.kubernetes.container.image.pullPolicy"]
	if pullPolicy == "" {
		pullPolicy = string(corev1.PullIfNotPresent)
	}
	container := corev1.Container{
		Name:            contract.DriverContainerName,
		Image:           image,
		ImagePullPolicy: corev1.PullPolicy(pullPolicy),
		Args:            args,
		Ports: []corev1.ContainerPort{
			{Name: PortNameDriverRPC, ContainerPort: DriverPort, Protocol: corev1.ProtocolTCP},
			{Name: PortNameBlockManager, ContainerPort: BlockManagerPort, Protocol: corev1.ProtocolTCP},
			{Name: PortNameUI, ContainerPort: UIPort, Protocol: corev1.ProtocolTCP},
		},
		Env:       env,
		Resources: res,
		VolumeMounts: []corev1.VolumeMount{
			{Name: localDirVolume, MountPath: b.localDir},
			{Name: confVolume, MountPath: SparkConfDir},
		},
	}

	nodeSelector := prefixed(conf, "spark.kubernetes.node.selector.")
	if !t.oldConfMap {
		maps.Copy(nodeSelector, prefixed(conf, "spark.kubernetes.driver.node.selector."))
	}
	if len(nodeSelector) == 0 {
		nodeSelector = nil
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	ns := conf["spark.kubernetes.namespace"]
	spec := corev1.PodSpec{
		RestartPolicy:      corev1.RestartPolicyNever,
		ServiceAccountName: conf["spark.kubernetes.authenticate.driver.serviceAccountName"],
		NodeSelector:       nodeSelector,
		ImagePullSecrets:   pullSecrets(conf),
		Volumes: []corev1.Volume{
			{Name: localDirVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: confVolume, VolumeSource: corev1.VolumeSource{ConfigMap: cmSource}},
		},
	}
	if port := connectPort(conf); t.connectPort && port != 0 {
		container.Ports = append(container.Ports, corev1.ContainerPort{Name: PortNameConnect, ContainerPort: port, Protocol: corev1.ProtocolTCP})
	}
	if p.Claims, err = b.mountPVCs(&spec, &container); err != nil {
		return err
	}
	spec.Containers = []corev1.Container{container}
	p.DriverPod = &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: p.DriverPodName, Namespace: ns, Labels: labels, Annotations: annotations,
		},
		Spec: spec,
	}

	// The ConfigMap (KubernetesClientUtils.buildConfigMap; 2.4: Client.buildConfigMap).
	data := map[string]string{
		SparkConfFile: storeProperties(props, "Java properties built from Kubernetes config map with name: "+p.ConfigMapName, now),
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: p.ConfigMapName, Namespace: ns},
		Data:       data,
	}
	if !t.oldConfMap {
		// The namespace rides along as a data key (it is how buildConfigMap learns it) and the
		// map is immutable.
		data["spark.kubernetes.namespace"] = ns
		cm.Immutable = ptr.To(true)
	}
	p.ConfigMap = cm

	// The driver Service (DriverServiceFeatureStep): headless, selecting the driver's labels.
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: p.ServiceName, Namespace: ns},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  maps.Clone(labels),
			Ports: []corev1.ServicePort{
				{Name: PortNameDriverRPC, Port: DriverPort, TargetPort: intstr.FromInt32(DriverPort)},
				{Name: PortNameBlockManager, Port: BlockManagerPort, TargetPort: intstr.FromInt32(BlockManagerPort)},
				{Name: PortNameUI, Port: UIPort, TargetPort: intstr.FromInt32(UIPort)},
			},
		},
	}
	if port := connectPort(conf); t.connectPort && port != 0 { // a port of 0 is invalid: Spark leaves it out
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: PortNameConnect, Port: port,
			TargetPort: intstr.FromInt32(port), AppProtocol: ptr.To("grpc")})
	}
	if !t.oldConfMap {
		svcLabels := prefixed(conf, "spark.kubernetes.driver.service.label.")
		svcLabels[contract.LabelSparkAppSelector] = p.AppID
		svc.Labels = svcLabels
		if a := prefixed(conf, "spark.kubernetes.driver.service.annotation."); len(a) > 0 {
			svc.Annotations = a
		}
		svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
		svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	}
	p.Service = svc
	return nil
}

// connectPort is spark.connect.grpc.binding.port, default ConnectPort.
func connectPort(conf map[string]string) int32 {
	if v, err := strconv.ParseInt(conf["spark.connect.grpc.binding.port"], 10, 32); err == nil {
		return int32(v)
	}
	return ConnectPort
}

func pullSecrets(conf map[string]string) []corev1.LocalObjectReference {
	var out []corev1.LocalObjectReference
	for _, s := range strings.Split(conf["spark.kubernetes.container.image.pullSecrets"], ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, corev1.LocalObjectReference{Name: s})
		}
	}
	return out
}

// ownerReference is KubernetesUtils.addOwnerReference's reference to the driver pod: exactly
// one, controller true, no blockOwnerDeletion.
func ownerReference(pod *corev1.Pod) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true),
	}
}
