package convert

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/wrap"
)

// Options are the deployment's choices that are not in the driver pod.
type Options struct {
	// Image is driverset's own image, run by the init container that copies the binary (`serve --image`).
	Image           string
	ImagePullPolicy corev1.PullPolicy
	// Floor is what the namespace's LimitRanges require of every container (FloorOf): the init
	// container asks at least that, or the LimitRanger would refuse the StatefulSet's pod.
	Floor corev1.ResourceList
	// Names are S's and H's names; empty: contract.NamesFor(p.Name). The controller gives a
	// placeholder admitted by an earlier driverset the names it has (contract.LegacyNamesFor).
	Names contract.Names
	// SelfFence, when positive, is the T with which `driverset wrap` keeps the driver's heartbeat
	// Lease (the controller has bounded it by the admin's limits); 0 keeps none.
	SelfFence time.Duration
}

// revisionHistoryLimit is small: with OnDelete and a template driverset never changes, S has one revision.
const revisionHistoryLimit = 2

// serviceAccountVolumePrefix names the projected volume the ServiceAccount admission plugin injects.
// It is injected again, with a fresh name, for every pod the StatefulSet creates; a copy in the
// template would be a second token volume.
const serviceAccountVolumePrefix = "kube-api-access-"

// StatefulSet builds S for the placeholder p as the apiserver persisted it (with a name, namespace,
// UID and the placeholder gate): one replica that runs the real driver, owned by p.
func StatefulSet(p *corev1.Pod, o Options) (*appsv1.StatefulSet, error) {
	n, err := persistedPlaceholder(p, o.Names)
	if err != nil {
		return nil, err
	}
	if o.Image == "" {
		return nil, errors.New("no image for the driverset-install init container (serve --image)")
	}
	recorded, err := RealResources(p)
	if err != nil {
		return nil, err
	}
	tpl, err := template(p, n, recorded, o)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{contract.LabelDriver: n.StatefulSet}
	if app, ok := p.Labels[contract.LabelSparkAppSelector]; ok {
		labels[contract.LabelSparkAppSelector] = app
	}
	replicas := int32(1)
	history := int32(revisionHistoryLimit)
	return &appsv1.StatefulSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            n.StatefulSet,
			Namespace:       p.Namespace,
			Labels:          labels,
			OwnerReferences: ownedBy(p),
		},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    &replicas,
			ServiceName: n.Service,
			Selector:    &metav1.LabelSelector{MatchLabels: driverSelector(n)},
			// OnDelete: a template change never restarts a running driver.
			UpdateStrategy:       appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			RevisionHistoryLimit: &history,
			Template:             tpl,
		},
	}, nil
}

// template is p's metadata and spec, made runnable by a StatefulSet and wrapped by driverset.
func template(p *corev1.Pod, n contract.Names, recorded ContainerResources, o Options) (corev1.PodTemplateSpec, error) {
	t := corev1.PodTemplateSpec{
		// The finalizer keeps each incarnation until the controller has read its driver's exit.
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}, Annotations: map[string]string{}, Finalizers: []string{contract.FinalizerOutcome}},
		Spec:       *p.Spec.DeepCopy(),
	}
	for k, v := range p.Labels {
		if k != contract.LabelPlaceholder {
			t.Labels[k] = v
		}
	}
	t.Labels[contract.LabelDriver] = n.StatefulSet
	for k, v := range p.Annotations {
		switch k {
		case contract.AnnotationResources, contract.AnnotationRestarts, contract.AnnotationRestartsTotal, contract.AnnotationRestartedIncarnation:
		default:
			t.Annotations[k] = v
		}
	}
	if len(t.Annotations) == 0 {
		t.Annotations = nil
	}

	spec := &t.Spec
	// No scheduling gate of P is carried into S-0, driverset's or anyone's. A gate is lifted by
	// the controller that added it, on the pod it added it to: Kueue, Volcano or a user's
	// controller lifts it on P (or never, P never runs anyway) and does not know S-0, so a copy
	// would hold the driver forever. A controller that holds pods does so with its own webhook
	// when the pod is created, and S-0 is created through those webhooks like any pod, carrying
	// P's labels (a Kueue queue name among them); driverset's incarnation gate comes the same way.
	spec.SchedulingGates = nil
	unmergeLabelKeys(spec, p.Labels)
	// The only policy a StatefulSet allows; `driverset wrap` makes sure the driver still runs once.
	spec.RestartPolicy = corev1.RestartPolicyAlways
	// Set on p by the scheduler or by admission plugins that set them again for S-0 (Priority,
	// RuntimeClass) and refuse a pod whose values disagree; or forbidden in a StatefulSet template
	// (activeDeadlineSeconds, ephemeral containers); or set by the StatefulSet (hostname, subdomain).
	spec.NodeName = ""
	spec.Priority = nil
	spec.PreemptionPolicy = nil
	spec.Overhead = nil
	spec.ActiveDeadlineSeconds = nil
	spec.EphemeralContainers = nil
	spec.Hostname = ""
	spec.Subdomain = ""
	removeServiceAccountVolume(spec)

	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			if r, ok := recorded[cs[i].Name]; ok {
				cs[i].Resources = *r.DeepCopy()
			}
		}
	}
	if r, ok := recorded[PodLevelKey]; ok {
		spec.Resources = r.DeepCopy()
	}

	spec.Volumes = append(spec.Volumes, corev1.Volume{
		Name:         VolumeName,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
	})
	spec.InitContainers = append([]corev1.Container{installContainer(o)}, spec.InitContainers...)
	driver := &spec.Containers[driverContainer(p)]
	entry := driver.Command
	if len(entry) == 0 {
		entrypoint, err := entrypointOf(p)
		if err != nil {
			return corev1.PodTemplateSpec{}, err
		}
		entry = []string{entrypoint}
	}
	wrapDriver(driver, entry, n, p.Namespace, incarnationsAppID(p))
	if o.SelfFence > 0 {
		keepHeartbeat(driver, n.HeartbeatLease(), o.SelfFence)
	}
	return t, nil
}

// removeServiceAccountVolume drops the token volume the ServiceAccount admission plugin injected into
// p, and its mounts; the plugin injects a fresh one into S-0.
func removeServiceAccountVolume(spec *corev1.PodSpec) {
	injected := map[string]bool{}
	var volumes []corev1.Volume
	for _, v := range spec.Volumes {
		if injectedTokenVolume(v) {
			injected[v.Name] = true
			continue
		}
		volumes = append(volumes, v)
	}
	if len(injected) == 0 {
		return
	}
	spec.Volumes = volumes
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			var mounts []corev1.VolumeMount
			for _, m := range cs[i].VolumeMounts {
				if !injected[m.Name] {
					mounts = append(mounts, m)
				}
			}
			cs[i].VolumeMounts = mounts
		}
	}
}

// injectedTokenVolume tells the volume the ServiceAccount admission plugin injected (its name's
// prefix and exactly its three sources: the token at "token" for the apiserver's audience, the
// cluster's CA, the namespace) from a projected volume of the user's own that only shares the
// prefix, which is kept.
func injectedTokenVolume(v corev1.Volume) bool {
	if !strings.HasPrefix(v.Name, serviceAccountVolumePrefix) || v.Projected == nil || len(v.Projected.Sources) != 3 {
		return false
	}
	token, ca, ns := v.Projected.Sources[0].ServiceAccountToken, v.Projected.Sources[1].ConfigMap, v.Projected.Sources[2].DownwardAPI
	return token != nil && token.Path == "token" && token.Audience == "" &&
		ca != nil && ca.Name == "kube-root-ca.crt" &&
		ns != nil && len(ns.Items) == 1 && ns.Items[0].Path == "namespace"
}

// installContainer copies the driverset binary into the shared emptyDir. It is tiny (a quota with
// limits.* requires limits on every container) and meets the `restricted` Pod Security level, so
// S-0 can be created in any namespace the driver itself could run in.
func installContainer(o Options) corev1.Container {
	yes, no := true, false
	uid := int64(65532)
	return corev1.Container{
		Name:            InstallContainerName,
		Image:           o.Image,
		ImagePullPolicy: o.ImagePullPolicy,
		Command:         []string{"/driverset", "copy-binary", BinaryPath},
		VolumeMounts:    []corev1.VolumeMount{{Name: VolumeName, MountPath: MountPath}},
		Resources:       installResources(o.Floor),
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             &yes,
			RunAsUser:                &uid,
			AllowPrivilegeEscalation: &no,
			ReadOnlyRootFilesystem:   &yes,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
}

// wrapDriver runs the driver container's entrypoint under `driverset wrap` and points Spark at the
// running pod's own name and stable host. `--conf k=v` right after the entry command ("driver",
// or 2.4's "driver-py"/"driver-r") wins over the
// properties file (docs/spark-facts.md §3), so Spark's own settings need no change.
// entry is what the container ran before: its command, or the image's entrypoint. appID, when
// set, is the submitted app id that wrap gives each incarnation its own variant of (ownAppID).
func wrapDriver(c *corev1.Container, entry []string, n contract.Names, ns, appID string) {
	// wrap must write its termination message into the file the kubelet reads for this container:
	// the container's own terminationMessagePath, or the default the apiserver would set. Set
	// explicitly, so the template says which file the controller's reading depends on.
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	c.Command = []string{BinaryPath, "wrap", "--state-dir", StateDir, "--termination-log", c.TerminationMessagePath}
	if appID != "" {
		c.Command = append(c.Command, "--"+wrap.FlagSparkAppID, appID, "--"+wrap.FlagIncarnation, "$("+contract.EnvPodUID+")")
	}
	c.Command = append(append(c.Command, "--"), entry...)

	// The entry command stays as Spark wrote it: "driver", or 2.4's "driver-py" / "driver-r".
	c.Args = slices.Concat(c.Args[:1], DriverConf(n, ns, appID), c.Args[1:])

	env := slices.DeleteFunc(slices.Clone(c.Env), func(e corev1.EnvVar) bool {
		return e.Name == contract.EnvPodName || (appID != "" && e.Name == contract.EnvPodUID)
	})
	env = append(env, corev1.EnvVar{
		Name:      contract.EnvPodName,
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}},
	})
	if appID != "" {
		env = append(env, podUIDEnv())
	}
	c.Env = env
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: VolumeName, MountPath: MountPath})
	// File, not FallbackToLogsOnError: the wrapper writes the exit record there, and a log tail
	// must never be mistaken for it.
	c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
}

// DriverConf is the Spark settings S-0 adds to the driver's arguments, right after the entry
// command (see wrapDriver), for the StatefulSet of names n in namespace ns: the pod it runs in (the
// owner of its executors) and its stable host. They also make the driver create its executors as
// driverset wants them, so that they need no webhook (docs/design.md#the-executor-patch): labelled
// contract.LabelDriver=<S> at birth, which puts them in driverset's cache even when they are made
// while driverset is down, and given the stable host in SPARK_DRIVER_URL, with Spark 4.1's
// useDriverPodIP off (older versions ignore the key), where it would put the pod IP that a new
// incarnation never keeps. appID, when set, is the submitted app id, which wrap turns into the
// incarnation's own (incarnationsAppID).
func DriverConf(n contract.Names, ns, appID string) []string {
	conf := []string{
		"--conf", fmt.Sprintf("spark.kubernetes.driver.pod.name=$(%s)", contract.EnvPodName),
		"--conf", "spark.driver.host=" + n.DriverHost(ns),
		"--conf", contract.SettingExecutorLabelDriver + "=" + n.StatefulSet,
		"--conf", "spark.kubernetes.executor.useDriverPodIP=false",
	}
	if appID != "" {
		conf = append(conf, "--conf", "spark.app.id="+appID)
	}
	return conf
}

// installResources are the init container's: requests equal to limits (so any LimitRange
// limit/request ratio holds, and a quota on limits finds them), raised to the namespace's floor.
// An init container adds nothing to the pod's effective request while the driver asks more.
func installResources(floor corev1.ResourceList) corev1.ResourceRequirements {
	list := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("50m"),
		corev1.ResourceMemory: resource.MustParse("32Mi"),
	}
	for name, q := range floor {
		if cur, ok := list[name]; !ok || q.Cmp(cur) > 0 {
			list[name] = q
		}
	}
	return corev1.ResourceRequirements{Requests: list, Limits: list.DeepCopy()}
}
