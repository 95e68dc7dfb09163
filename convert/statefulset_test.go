package convert

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/driverset/driverset/contract"
)

var testOptions = Options{Image: "ghcr.io/driverset/driverset:v0.1.0", ImagePullPolicy: corev1.PullIfNotPresent}

func buildS(t *testing.T, p *corev1.Pod) *appsv1.StatefulSet {
	t.Helper()
	s, err := StatefulSet(p, testOptions)
	if err != nil {
		t.Fatalf("StatefulSet: %v", err)
	}
	return s
}

func containerNamed(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

// TestStatefulSetObject: S runs one driver, is owned by P, is found by its headless Service, and
// never restarts a running driver because its template changed.
func TestStatefulSetObject(t *testing.T) {
	p := persisted(driverPod())
	s := buildS(t, p)
	n := contract.NamesFor(p.Name)
	yes := true
	checks := []struct {
		what      string
		got, want any
	}{
		{"name", s.Name, "pi-0123456789abcdef-driver"},
		{"namespace", s.Namespace, "jobs"},
		{"labels", s.Labels, map[string]string{contract.LabelDriver: n.StatefulSet, contract.LabelSparkAppSelector: "spark-0123456789abcdef0123456789abcdef"}},
		{"owner", s.OwnerReferences, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: &yes, BlockOwnerDeletion: &yes}}},
		{"replicas", *s.Spec.Replicas, int32(1)},
		{"serviceName", s.Spec.ServiceName, n.Service},
		{"selector", s.Spec.Selector.MatchLabels, map[string]string{contract.LabelDriver: n.StatefulSet, contract.LabelSparkRole: contract.RoleDriver}},
		{"update strategy", s.Spec.UpdateStrategy, appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}},
		{"pod management policy", s.Spec.PodManagementPolicy, appsv1.PodManagementPolicyType("")},
		{"revision history", *s.Spec.RevisionHistoryLimit, int32(2)},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(s.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(s.Spec.Template.Labels)) {
		t.Errorf("selector %v does not select the template's labels %v (%v)", s.Spec.Selector, s.Spec.Template.Labels, err)
	}
}

// TestStatefulSetTemplate: the template is P's pod, runnable by a StatefulSet, with the real
// resources back and none of what marks P as a placeholder or was set on P by the apiserver.
func TestStatefulSetTemplate(t *testing.T) {
	pod := driverPod()
	prio := int32(1000)
	never := corev1.PreemptNever
	deadline := int64(3600)
	pod.Annotations = map[string]string{"team": "growth", contract.AnnotationMaxRestarts: "5"}
	pod.Spec.Priority, pod.Spec.PriorityClassName, pod.Spec.PreemptionPolicy = &prio, "batch", &never
	pod.Spec.Overhead = list("cpu", "250m")
	pod.Spec.ActiveDeadlineSeconds = &deadline
	pod.Spec.Hostname, pod.Spec.Subdomain = "h", "sub"
	pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}, {Name: "kueue.x-k8s.io/admission"}}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "spark-local-dir-1", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "kube-api-access-7x2kq", VolumeSource: corev1.VolumeSource{Projected: apiserverTokenVolume()}},
		// A user's own volume that merely starts like the injected one is kept: it is not projected.
		{Name: "kube-api-access-mine", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		// Nor is a projected one of the user's own: a token for another audience (issue 35).
		{Name: "kube-api-access-vault", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "vault", Path: "vault-token"}}},
		}}},
	}
	tokenMount := corev1.VolumeMount{Name: "kube-api-access-7x2kq", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "spark-local-dir-1", MountPath: "/var/data"}, tokenMount}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "SPARK_USER", Value: "spark"}, {Name: contract.EnvPodName, Value: "stale"}}
	pod.Spec.InitContainers = []corev1.Container{{Name: "fetch", Image: "busybox", VolumeMounts: []corev1.VolumeMount{tokenMount},
		Resources: corev1.ResourceRequirements{Requests: list("cpu", "500m", "memory", "256Mi")}}}
	p := persisted(pod)
	p.Annotations[contract.AnnotationRestarts] = "1"
	p.Annotations[contract.AnnotationRestartedIncarnation] = "uid-1"
	tpl := buildS(t, p).Spec.Template
	spec := tpl.Spec
	n := contract.NamesFor(p.Name)

	wantLabels := map[string]string{
		contract.LabelSparkRole: contract.RoleDriver, contract.LabelSparkAppSelector: "spark-0123456789abcdef0123456789abcdef",
		contract.LabelResilient: "true", contract.LabelDriver: n.StatefulSet,
	}
	if !reflect.DeepEqual(tpl.Labels, wantLabels) {
		t.Errorf("template labels %v, want %v", tpl.Labels, wantLabels)
	}
	if want := map[string]string{"team": "growth", contract.AnnotationMaxRestarts: "5"}; !reflect.DeepEqual(tpl.Annotations, want) {
		t.Errorf("template annotations %v, want %v", tpl.Annotations, want)
	}
	// No gate of P is carried: a gate is lifted by whoever added it, on the pod it added it to,
	// so a copy in S-0 would hold the driver forever (see template).
	if len(spec.SchedulingGates) != 0 {
		t.Errorf("template gates %v, want none", spec.SchedulingGates)
	}
	if spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("restartPolicy %q, want Always", spec.RestartPolicy)
	}
	if spec.PriorityClassName != "batch" {
		t.Errorf("priorityClassName %q, want it kept", spec.PriorityClassName)
	}
	if spec.NodeName != "" || spec.Priority != nil || spec.PreemptionPolicy != nil || spec.Overhead != nil ||
		spec.ActiveDeadlineSeconds != nil || spec.EphemeralContainers != nil || spec.Hostname != "" || spec.Subdomain != "" {
		t.Errorf("fields the apiserver or the StatefulSet sets are still there: %+v", spec)
	}

	var volumes []string
	for _, v := range spec.Volumes {
		volumes = append(volumes, v.Name)
	}
	if want := []string{"spark-local-dir-1", "kube-api-access-mine", "kube-api-access-vault", "driverset"}; !reflect.DeepEqual(volumes, want) {
		t.Errorf("volumes %v, want %v", volumes, want)
	}
	if v := spec.Volumes[len(spec.Volumes)-1]; v.EmptyDir == nil {
		t.Errorf("volume driverset is %+v, want an emptyDir", v.VolumeSource)
	}

	var inits []string
	for _, c := range spec.InitContainers {
		inits = append(inits, c.Name)
		for _, m := range c.VolumeMounts {
			if m.Name == tokenMount.Name {
				t.Errorf("init container %s still mounts the injected token volume", c.Name)
			}
		}
	}
	if want := []string{"driverset-install", "fetch"}; !reflect.DeepEqual(inits, want) {
		t.Errorf("init containers %v, want %v (the installer first)", inits, want)
	}
	if got := containerNamed(spec.InitContainers, "fetch").Resources; !equalResources(got, corev1.ResourceRequirements{Requests: list("cpu", "500m", "memory", "256Mi")}) {
		t.Errorf("init container resources %v, want the real ones back", got)
	}

	d := containerNamed(spec.Containers, contract.DriverContainerName)
	if !equalResources(d.Resources, corev1.ResourceRequirements{Requests: list("cpu", "1", "memory", "1408Mi"), Limits: list("memory", "1408Mi")}) {
		t.Errorf("driver resources %v, want the real ones back", d.Resources)
	}
	wantMounts := []corev1.VolumeMount{{Name: "spark-local-dir-1", MountPath: "/var/data"}, {Name: "driverset", MountPath: "/opt/driverset"}}
	if !reflect.DeepEqual(d.VolumeMounts, wantMounts) {
		t.Errorf("driver mounts %v, want %v", d.VolumeMounts, wantMounts)
	}
	wantEnv := []corev1.EnvVar{{Name: "SPARK_USER", Value: "spark"}, {Name: contract.EnvPodName,
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
		{Name: contract.EnvPodUID, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.uid"}}}}
	if !reflect.DeepEqual(d.Env, wantEnv) {
		t.Errorf("driver env %v, want %v", d.Env, wantEnv)
	}
	wantArgs := []string{"driver",
		"--conf", "spark.kubernetes.driver.pod.name=$(DRIVERSET_POD_NAME)",
		"--conf", "spark.driver.host=pi-0123456789abcdef-driver-0.pi-0123456789abcdef-driver-ds.jobs.svc",
		"--conf", "spark.kubernetes.executor.label.driverset.dev/driver=pi-0123456789abcdef-driver",
		"--conf", "spark.kubernetes.executor.useDriverPodIP=false",
		"--conf", "spark.app.id=spark-0123456789abcdef0123456789abcdef",
		"--properties-file", "/opt/spark/conf/spark.properties", "--class", "Pi", "spark-internal"}
	if !reflect.DeepEqual(d.Args, wantArgs) {
		t.Errorf("driver args\n%q\nwant\n%q", d.Args, wantArgs)
	}
	if d.TerminationMessagePolicy != corev1.TerminationMessageReadFile {
		t.Errorf("terminationMessagePolicy %q, want File", d.TerminationMessagePolicy)
	}
	// P itself is not changed by building S.
	if p.Spec.Containers[0].Command != nil || len(p.Spec.InitContainers) != 1 || !IsPlaceholder(p) {
		t.Error("StatefulSet modified the placeholder it was given")
	}
}

// TestStatefulSetEntrypoint: the wrapper runs the container's own command, or the image's
// entrypoint when Spark left the command to the image.
func TestStatefulSetEntrypoint(t *testing.T) {
	wrap := []string{"/opt/driverset/bin/driverset", "wrap", "--state-dir", "/opt/driverset/state", "--termination-log", "/dev/termination-log",
		"--spark-app-id", "spark-0123456789abcdef0123456789abcdef", "--incarnation", "$(DRIVERSET_POD_UID)", "--"}
	cases := []struct {
		name       string
		command    []string
		entrypoint string
		want       []string
	}{
		{name: "spark's pod: the image's default entrypoint", want: append(slices.Clone(wrap), "/opt/entrypoint.sh")},
		{name: "entrypoint annotation", entrypoint: "/opt/spark/kubernetes/entrypoint.sh", want: append(slices.Clone(wrap), "/opt/spark/kubernetes/entrypoint.sh")},
		{name: "command set by a pod template", command: []string{"/usr/bin/tini", "-s", "--", "/opt/entrypoint.sh"},
			want: append(slices.Clone(wrap), "/usr/bin/tini", "-s", "--", "/opt/entrypoint.sh")},
		{name: "command wins over the annotation", command: []string{"/start"}, entrypoint: "/ignored", want: append(slices.Clone(wrap), "/start")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := driverPod()
			pod.Spec.Containers[0].Command = tc.command
			if tc.entrypoint != "" {
				pod.Annotations = map[string]string{contract.AnnotationEntrypoint: tc.entrypoint}
			}
			got := buildS(t, persisted(pod)).Spec.Template.Spec.Containers[0].Command
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("command %q, want %q", got, tc.want)
			}
		})
	}
}

// TestStatefulSetTerminationLog: wrap writes its termination message into the very file the
// kubelet reads for the driver container, so the controller reads the driver's recorded exit.
func TestStatefulSetTerminationLog(t *testing.T) {
	cases := []struct {
		name, path, want string
	}{
		{name: "no path: the Kubernetes default", path: "", want: "/dev/termination-log"},
		{name: "the container's own path is honoured", path: "/var/log/driver/exit-message", want: "/var/log/driver/exit-message"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := driverPod()
			pod.Spec.Containers[0].TerminationMessagePath = tc.path
			d := buildS(t, persisted(pod)).Spec.Template.Spec.Containers[0]
			if d.TerminationMessagePath != tc.want {
				t.Errorf("terminationMessagePath %q, want %q set explicitly", d.TerminationMessagePath, tc.want)
			}
			sep := slices.Index(d.Command, "--")
			i := slices.Index(d.Command[:max(sep, 0)], "--termination-log")
			if i < 0 || i+1 >= sep || d.Command[i+1] != tc.want {
				t.Errorf("command %q does not pass --termination-log %s to wrap", d.Command, tc.want)
			}
		})
	}
}

// TestStatefulSetNames: whatever P is called, S and H get names the apiserver accepts, and the
// driver is told the host name they make.
func TestStatefulSetNames(t *testing.T) {
	for _, name := range []string{
		"pi-0123456789abcdef-driver",
		"clickstream-sessionization-to-lakehouse-checkpointed-driver",
		"spark.pi.driver",
		"2024-report-driver",
		strings.Repeat("a", 52),
		strings.Repeat("a", 53),
		strings.Repeat("a.", 100) + "b",
	} {
		t.Run(name, func(t *testing.T) {
			pod := driverPod()
			pod.Name = name
			p := persisted(pod)
			s := buildS(t, p)
			h, err := Service(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range apiserverChecks(s, h) {
				t.Error(e)
			}
			if s.Name != contract.NamesFor(name).StatefulSet || h.Name != contract.NamesFor(name).Service {
				t.Errorf("names %s/%s do not come from contract.NamesFor", s.Name, h.Name)
			}
			host := contract.NamesFor(name).DriverHost(p.Namespace)
			if !slices.Contains(s.Spec.Template.Spec.Containers[0].Args, "spark.driver.host="+host) {
				t.Errorf("driver args %q do not set spark.driver.host=%s", s.Spec.Template.Spec.Containers[0].Args, host)
			}
		})
	}
}

// apiserverChecks are the cheap parts of the apiserver's validation of S and H: names, label
// values, selector, unique container/volume names, one mount per path.
func apiserverChecks(s *appsv1.StatefulSet, h *corev1.Service) []string {
	var errs []string
	add := func(what string, msgs []string) {
		for _, m := range msgs {
			errs = append(errs, what+": "+m)
		}
	}
	add("StatefulSet name "+s.Name, validation.IsDNS1123Label(s.Name))
	if len(s.Name) > contract.MaxStatefulSetName {
		errs = append(errs, "StatefulSet name longer than 52: its pods' controller-revision-hash label would be too long")
	}
	add("driver pod name", validation.IsDNS1123Label(s.Name+"-0"))
	add("Service name "+h.Name, validation.IsDNS1035Label(h.Name))
	add("StatefulSet serviceName", validation.IsDNS1035Label(s.Spec.ServiceName))
	for _, ls := range []map[string]string{s.Labels, s.Spec.Template.Labels, s.Spec.Selector.MatchLabels, h.Labels, h.Spec.Selector} {
		for k, v := range ls {
			add("label key "+k, validation.IsQualifiedName(k))
			add("label "+k+" value", validation.IsValidLabelValue(v))
		}
	}
	for k, v := range s.Spec.Selector.MatchLabels {
		if s.Spec.Template.Labels[k] != v {
			errs = append(errs, "selector does not match the template: "+k)
		}
		if h.Spec.Selector[k] != v {
			errs = append(errs, "Service selector differs from the StatefulSet's: "+k)
		}
	}
	spec := s.Spec.Template.Spec
	if spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, "template restartPolicy must be Always")
	}
	if spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, "template must not set activeDeadlineSeconds")
	}
	names := map[string]bool{}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		if names[c.Name] {
			errs = append(errs, "duplicate container "+c.Name)
		}
		names[c.Name] = true
		paths := map[string]bool{}
		for _, m := range c.VolumeMounts {
			if paths[m.MountPath] {
				errs = append(errs, "duplicate mount path "+m.MountPath+" in "+c.Name)
			}
			paths[m.MountPath] = true
		}
	}
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		if volumes[v.Name] {
			errs = append(errs, "duplicate volume "+v.Name)
		}
		volumes[v.Name] = true
	}
	_, s0errs := s0Create(s.Spec.Template, s.Name+"-0")
	add("creating S-0", s0errs)
	add("S-0's pod-level resources", podLevelErrors(&spec))
	return errs
}

func TestStatefulSetRefuses(t *testing.T) {
	cases := []struct {
		name string
		pod  func() *corev1.Pod
		opts Options
		want string
	}{
		{name: "not persisted", pod: func() *corev1.Pod { p := persisted(driverPod()); p.UID = ""; return p }, opts: testOptions, want: "not persisted"},
		{name: "not gated: P could run too", pod: func() *corev1.Pod { p := driverPod(); p.UID = "u"; return p }, opts: testOptions, want: "no scheduling gate"},
		{name: "no image", pod: func() *corev1.Pod { return persisted(driverPod()) }, want: "no image"},
		{name: "bad recorded resources", pod: func() *corev1.Pod {
			p := persisted(driverPod())
			p.Annotations[contract.AnnotationResources] = "{"
			return p
		}, opts: testOptions, want: "annotation driverset.dev/resources"},
		{name: "entrypoint edited to a relative path", pod: func() *corev1.Pod {
			p := persisted(driverPod())
			p.Annotations[contract.AnnotationEntrypoint] = "entrypoint.sh"
			return p
		}, opts: testOptions, want: "driverset.dev/entrypoint"},
		{name: "driver container gone", pod: func() *corev1.Pod {
			p := persisted(driverPod())
			p.Spec.Containers[0].Name, p.Spec.Containers[0].Args = "x", nil
			return p
		}, opts: testOptions, want: "no container named"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.pod()
			if _, err := StatefulSet(p, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("StatefulSet: %v, want an error about %q", err, tc.want)
			}
		})
	}
	// S and H do not use these settings: a placeholder edited after admission keeps its objects.
	p := persisted(driverPod())
	p.Annotations[contract.AnnotationFenceAfter] = "soon"
	p.Annotations[contract.AnnotationMaxRestarts] = "many"
	if _, err := StatefulSet(p, testOptions); err != nil {
		t.Errorf("StatefulSet for a placeholder with edited max-restarts/fence-after: %v", err)
	}
	if _, err := Service(p); err != nil {
		t.Errorf("Service for a placeholder with edited max-restarts/fence-after: %v", err)
	}
	var nc *NotConvertible
	if _, err := Service(driverPod()); err == nil || errors.As(err, &nc) {
		t.Errorf("Service for a pod that is not a persisted placeholder: %v, want a plain error", err)
	}
}

// TestInstallContainerIsRestricted: the injected init container meets the `restricted` Pod Security
// level on its own, and a driver that met it still does after conversion, so S-0 is admitted in
// any namespace where the driver was.
func TestInstallContainerIsRestricted(t *testing.T) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	restricted := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	check := func(what string, meta *metav1.ObjectMeta, spec *corev1.PodSpec) {
		t.Helper()
		if r := policy.AggregateCheckResults(eval.EvaluatePod(restricted, meta, spec)); !r.Allowed {
			t.Errorf("%s violates restricted: %s: %s", what, r.ForbiddenReason(), r.ForbiddenDetail())
		}
	}
	only := corev1.PodSpec{InitContainers: []corev1.Container{installContainer(testOptions)}, Containers: []corev1.Container{}}
	check("driverset-install alone", &metav1.ObjectMeta{}, &only)

	pod := driverPod()
	yes, no := true, false
	uid := int64(185)
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid,
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: &no,
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	check("the restricted driver pod", &pod.ObjectMeta, &pod.Spec)
	tpl := buildS(t, persisted(pod)).Spec.Template
	check("its StatefulSet's template", &tpl.ObjectMeta, &tpl.Spec)

	// The check itself must be able to fail: an init container running as root is refused.
	root := int64(0)
	bad := installContainer(testOptions)
	bad.SecurityContext.RunAsUser = &root
	bad.SecurityContext.RunAsNonRoot = nil
	badSpec := corev1.PodSpec{InitContainers: []corev1.Container{bad}}
	if r := policy.AggregateCheckResults(eval.EvaluatePod(restricted, &metav1.ObjectMeta{}, &badSpec)); r.Allowed {
		t.Error("the restricted check accepted a root init container")
	}
}

func TestInstallContainer(t *testing.T) {
	c := installContainer(Options{Image: "registry.local/driverset:dev", ImagePullPolicy: corev1.PullAlways})
	if c.Name != "driverset-install" || c.Image != "registry.local/driverset:dev" || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("installer %s %s %s", c.Name, c.Image, c.ImagePullPolicy)
	}
	if want := []string{"/driverset", "copy-binary", "/opt/driverset/bin/driverset"}; !reflect.DeepEqual(c.Command, want) {
		t.Errorf("command %q, want %q", c.Command, want)
	}
	want := corev1.ResourceRequirements{Requests: list("cpu", "50m", "memory", "32Mi"), Limits: list("cpu", "50m", "memory", "32Mi")}
	if !equalResources(c.Resources, want) {
		t.Errorf("resources %v, want %v", c.Resources, want)
	}
	// Under a LimitRange min the init container asks at least the min, requests still = limits.
	floored := installContainer(Options{Image: "x", Floor: list("cpu", "100m", "memory", "16Mi")})
	want = corev1.ResourceRequirements{Requests: list("cpu", "100m", "memory", "32Mi"), Limits: list("cpu", "100m", "memory", "32Mi")}
	if !equalResources(floored.Resources, want) {
		t.Errorf("resources under a floor %v, want %v", floored.Resources, want)
	}
	if sc := c.SecurityContext; sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || *sc.RunAsUser != 65532 {
		t.Errorf("securityContext %+v, want a read-only root filesystem and uid 65532", sc)
	}
	if want := []corev1.VolumeMount{{Name: "driverset", MountPath: "/opt/driverset"}}; !reflect.DeepEqual(c.VolumeMounts, want) {
		t.Errorf("mounts %v, want %v", c.VolumeMounts, want)
	}
}

// TestStatefulSetKeepsTheEntryCommand: driverset's --conf settings go right after the entry
// command, which stays as Spark wrote it (2.4's PySpark and R drivers start with driver-py/driver-r).
func TestStatefulSetKeepsTheEntryCommand(t *testing.T) {
	rest := []string{"--properties-file", "/opt/spark/conf/spark.properties", "--class", "org.apache.spark.deploy.PythonRunner"}
	for _, entry := range []string{"driver", "driver-py", "driver-r"} {
		t.Run(entry, func(t *testing.T) {
			pod := driverPod()
			pod.Spec.Containers[0].Args = append([]string{entry}, rest...)
			got := buildS(t, persisted(pod)).Spec.Template.Spec.Containers[0].Args
			n := contract.NamesFor(pod.Name)
			want := append([]string{entry,
				"--conf", "spark.kubernetes.driver.pod.name=$(" + contract.EnvPodName + ")",
				"--conf", "spark.driver.host=" + n.DriverHost(pod.Namespace),
				"--conf", "spark.kubernetes.executor.label." + contract.LabelDriver + "=" + n.StatefulSet,
				"--conf", "spark.kubernetes.executor.useDriverPodIP=false",
				"--conf", "spark.app.id=" + pod.Labels[contract.LabelSparkAppSelector]}, rest...)
			if !slices.Equal(got, want) {
				t.Errorf("args %q, want %q", got, want)
			}
		})
	}
}

// apiserverTokenVolume is the projected volume the ServiceAccount admission plugin injects into a
// pod (k8s.io/kubernetes plugin/pkg/admission/serviceaccount, TokenVolumeSource), as the
// apiserver stores it.
func apiserverTokenVolume() *corev1.ProjectedVolumeSource {
	mode, expiry := int32(420), int64(3607)
	return &corev1.ProjectedVolumeSource{DefaultMode: &mode, Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &expiry, Path: "token"}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
			Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
	}}
}
