package sparksim

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/contract"
)

func envNames(env []corev1.EnvVar) []string {
	var out []string
	for _, e := range env {
		out = append(out, e.Name)
	}
	return out
}

func TestPlanShapes(t *testing.T) {
	tests := []struct {
		v             Version
		prefix        *regexp.Regexp
		configMap     *regexp.Regexp
		confVolume    string
		confItems     bool
		labels        []string
		env           []string
		primary       string
		fixedPrefix   bool
		svcLabelled   bool
		immutableConf bool
		svcPorts      []string
	}{{
		v:          Spark24,
		prefix:     regexp.MustCompile(`^spark-pi-1767323045678$`),
		configMap:  regexp.MustCompile(`^spark-pi-1767323045678-driver-conf-map$`),
		confVolume: "spark-conf-volume",
		labels:     []string{"spark-app-selector", "spark-role"},
		env:        []string{"SPARK_DRIVER_BIND_ADDRESS", "SPARK_LOCAL_DIRS", "SPARK_CONF_DIR"},
		primary:    "spark-internal", fixedPrefix: true,
		svcPorts: []string{"driver-rpc-port:7078", "blockmanager:7079", "spark-ui:4040"},
	}, {
		v:          Spark35,
		prefix:     regexp.MustCompile(`^spark-pi-[0-9a-f]{6}[0-9a-f]{1,10}$`),
		configMap:  regexp.MustCompile(`^spark-drv-[0-9a-f]{7,16}-conf-map$`),
		confVolume: "spark-conf-volume-driver", confItems: true,
		labels:  []string{"spark-app-name", "spark-app-selector", "spark-role", "spark-version"},
		env:     []string{"SPARK_USER", "SPARK_APPLICATION_ID", "SPARK_DRIVER_BIND_ADDRESS", "SPARK_LOCAL_DIRS", "SPARK_CONF_DIR"},
		primary: DefaultResource, svcLabelled: true, immutableConf: true,
		svcPorts: []string{"driver-rpc-port:7078", "blockmanager:7079", "spark-ui:4040"},
	}, {
		v:          Spark41,
		prefix:     regexp.MustCompile(`^spark-pi-[0-9a-f]{6}[0-9a-f]{1,10}$`),
		configMap:  regexp.MustCompile(`^spark-drv-[0-9a-f]{7,16}-conf-map$`),
		confVolume: "spark-conf-volume-driver", confItems: true,
		labels:  []string{"spark-app-name", "spark-app-selector", "spark-role", "spark-version"},
		env:     []string{"SPARK_USER", "SPARK_APPLICATION_ID", "SPARK_DRIVER_BIND_ADDRESS", "SPARK_LOCAL_DIRS", "SPARK_CONF_DIR"},
		primary: DefaultResource, svcLabelled: true, immutableConf: true,
		// 4.1 adds Spark Connect's gRPC port to the driver container and Service (SPARK-52193).
		svcPorts: []string{"driver-rpc-port:7078", "blockmanager:7079", "spark-ui:4040", "spark-connect:15002"},
	}}
	for _, tc := range tests {
		t.Run(string(tc.v), func(t *testing.T) {
			app := testApp(tc.v)
			app.AppArgs = []string{"1000"}
			p, err := app.Plan()
			if err != nil {
				t.Fatal(err)
			}
			if !regexp.MustCompile(`^spark-[0-9a-f]{32}$`).MatchString(p.AppID) {
				t.Errorf("app id %q is not spark-<32 hex>", p.AppID)
			}
			if !tc.prefix.MatchString(p.Prefix) {
				t.Errorf("prefix %q does not match %s", p.Prefix, tc.prefix)
			}
			if want := p.Prefix + "-driver"; p.DriverPodName != want || p.DriverPod.Name != want {
				t.Errorf("driver pod name %q / %q, want %q", p.DriverPodName, p.DriverPod.Name, want)
			}
			if want := p.Prefix + "-driver-svc"; p.ServiceName != want || p.Service.Name != want {
				t.Errorf("service name %q, want %q", p.ServiceName, want)
			}
			if !tc.configMap.MatchString(p.ConfigMapName) || p.ConfigMap.Name != p.ConfigMapName {
				t.Errorf("configmap name %q does not match %s", p.ConfigMapName, tc.configMap)
			}

			pod := p.DriverPod
			if pod.Namespace != "apps" || pod.Spec.RestartPolicy != corev1.RestartPolicyNever || pod.Spec.ServiceAccountName != "" {
				t.Errorf("pod namespace/restartPolicy/serviceAccount = %q/%q/%q", pod.Namespace, pod.Spec.RestartPolicy, pod.Spec.ServiceAccountName)
			}
			if got := slices.Sorted(maps.Keys(pod.Labels)); !slices.Equal(got, tc.labels) {
				t.Errorf("labels %v, want keys %v", pod.Labels, tc.labels)
			}
			if pod.Labels[contract.LabelSparkAppSelector] != p.AppID || pod.Labels[contract.LabelSparkRole] != contract.RoleDriver {
				t.Errorf("spark labels %v", pod.Labels)
			}
			if len(pod.Spec.Containers) != 1 {
				t.Fatalf("%d containers", len(pod.Spec.Containers))
			}
			ctr := pod.Spec.Containers[0]
			if ctr.Name != contract.DriverContainerName || len(ctr.Command) != 0 || ctr.Image != "apache/spark:"+string(tc.v) {
				t.Errorf("container name/command/image = %q/%q/%q", ctr.Name, ctr.Command, ctr.Image)
			}
			wantArgs := []string{"driver", "--properties-file", "/opt/spark/conf/spark.properties", "--class", DefaultMainClass, tc.primary, "1000"}
			if !slices.Equal(ctr.Args, wantArgs) {
				t.Errorf("args %q, want %q", ctr.Args, wantArgs)
			}
			if got := envNames(ctr.Env); !slices.Equal(got, tc.env) {
				t.Errorf("env %v, want %v", got, tc.env)
			}
			for _, e := range ctr.Env {
				if e.Name == "SPARK_DRIVER_BIND_ADDRESS" && (e.ValueFrom == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP") {
					t.Errorf("SPARK_DRIVER_BIND_ADDRESS is not the pod IP: %+v", e)
				}
				if e.Name == "SPARK_APPLICATION_ID" && e.Value != p.AppID {
					t.Errorf("SPARK_APPLICATION_ID %q", e.Value)
				}
			}
			var ports []string
			for _, cp := range ctr.Ports {
				ports = append(ports, cp.Name+":"+strconv.Itoa(int(cp.ContainerPort)))
			}
			if !slices.Equal(ports, tc.svcPorts) {
				t.Errorf("container ports %v, want those of the Service %v", ports, tc.svcPorts)
			}
			if got := ctr.Resources.Requests.Memory().String(); got != "1408Mi" || ctr.Resources.Limits.Memory().String() != "1408Mi" {
				t.Errorf("memory request/limit %s/%s, want 1408Mi (1024 + 384)", got, ctr.Resources.Limits.Memory())
			}
			if got := ctr.Resources.Requests.Cpu().String(); got != "1" {
				t.Errorf("cpu request %s", got)
			}
			if _, ok := ctr.Resources.Limits[corev1.ResourceCPU]; ok {
				t.Errorf("a cpu limit without spark.kubernetes.driver.limit.cores")
			}
			if len(pod.Spec.Volumes) != 2 || pod.Spec.Volumes[0].Name != "spark-local-dir-1" || pod.Spec.Volumes[0].EmptyDir == nil ||
				pod.Spec.Volumes[1].Name != tc.confVolume || pod.Spec.Volumes[1].ConfigMap == nil ||
				pod.Spec.Volumes[1].ConfigMap.Name != p.ConfigMapName || (len(pod.Spec.Volumes[1].ConfigMap.Items) == 1) != tc.confItems {
				t.Errorf("volumes %+v", pod.Spec.Volumes)
			}
			if m := ctr.VolumeMounts; len(m) != 2 || m[1].Name != tc.confVolume || m[1].MountPath != "/opt/spark/conf" ||
				!strings.HasPrefix(m[0].MountPath, "/var/data/spark-") {
				t.Errorf("mounts %+v", m)
			}

			svc := p.Service
			if svc.Spec.ClusterIP != corev1.ClusterIPNone || !maps.Equal(svc.Spec.Selector, pod.Labels) {
				t.Errorf("service is not headless with the driver's labels: %+v", svc.Spec)
			}
			var svcPorts []string
			for _, sp := range svc.Spec.Ports {
				svcPorts = append(svcPorts, sp.Name+":"+strconv.Itoa(int(sp.Port)))
			}
			if !slices.Equal(svcPorts, tc.svcPorts) {
				t.Errorf("service ports %v, want %v", svcPorts, tc.svcPorts)
			}
			if (svc.Labels[contract.LabelSparkAppSelector] == p.AppID) != tc.svcLabelled {
				t.Errorf("service labels %v", svc.Labels)
			}
			if len(svc.OwnerReferences) != 0 || len(p.ConfigMap.OwnerReferences) != 0 {
				t.Errorf("plan objects already owned")
			}
			if (p.ConfigMap.Immutable != nil && *p.ConfigMap.Immutable) != tc.immutableConf || len(p.ConfigMap.Labels) != 0 {
				t.Errorf("configmap immutable=%v labels=%v", p.ConfigMap.Immutable, p.ConfigMap.Labels)
			}

			props, err := loadProperties(p.ConfigMap.Data[SparkConfFile])
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(props, p.Properties) {
				t.Errorf("spark.properties does not round-trip:\n%v\n%v", props, p.Properties)
			}
			want := map[string]string{
				"spark.app.id":                     p.AppID,
				"spark.app.name":                   "spark-pi",
				"spark.driver.host":                p.ServiceName + ".apps.svc",
				"spark.driver.port":                "7078",
				"spark.driver.blockManager.port":   "7079",
				"spark.kubernetes.namespace":       "apps",
				"spark.kubernetes.driver.pod.name": p.DriverPodName,
				"spark.kubernetes.container.image": "apache/spark:" + string(tc.v),
				"spark.executor.instances":         "2",
				"spark.submit.deployMode":          "cluster",
				"spark.jars":                       DefaultResource,
			}
			for k, v := range want {
				if props[k] != v {
					t.Errorf("property %s = %q, want %q", k, props[k], v)
				}
			}
			if got, ok := props["spark.kubernetes.executor.podNamePrefix"]; ok != tc.fixedPrefix || (ok && got != p.Prefix) {
				t.Errorf("spark.kubernetes.executor.podNamePrefix = %q (set %v), want set %v", got, ok, tc.fixedPrefix)
			}
		})
	}
}

func TestPlanIsDeterministicForASeed(t *testing.T) {
	a, err := testApp(Spark35).Plan()
	if err != nil {
		t.Fatal(err)
	}
	b, err := testApp(Spark35).Plan()
	if err != nil {
		t.Fatal(err)
	}
	if a.AppID != b.AppID || a.Prefix != b.Prefix || a.ConfigMapName != b.ConfigMapName ||
		a.ConfigMap.Data[SparkConfFile] != b.ConfigMap.Data[SparkConfFile] {
		t.Errorf("same seed, different plans: %+v vs %+v", a, b)
	}
	other := testApp(Spark35)
	other.Rand = seeded(2)
	c, err := other.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if c.AppID == a.AppID || c.Prefix == a.Prefix {
		t.Errorf("different seeds gave the same ids %s %s", c.AppID, c.Prefix)
	}
}

func TestPlanSettings(t *testing.T) {
	app := testApp(Spark41)
	app.DriverPodName = "my-driver"
	app.ServiceAccount = "spark"
	app.DriverCores = "2"
	app.DriverCoreLimit = "3"
	app.DriverLabels = map[string]string{contract.LabelResilient: "true", "team": "{{APP_ID}}"}
	app.DriverAnnotations = map[string]string{contract.AnnotationMaxRestarts: "5"}
	app.Conf = map[string]string{"spark.kubernetes.driverEnv.FOO": "bar", "spark.eventLog.enabled": "true"}
	p, err := app.Plan()
	if err != nil {
		t.Fatal(err)
	}
	pod := p.DriverPod
	ctr := pod.Spec.Containers[0]
	if pod.Name != "my-driver" || pod.Spec.ServiceAccountName != "spark" {
		t.Errorf("name %q serviceAccount %q", pod.Name, pod.Spec.ServiceAccountName)
	}
	if pod.Labels[contract.LabelResilient] != "true" || pod.Labels["team"] != p.AppID {
		t.Errorf("user labels not applied (with {{APP_ID}}): %v", pod.Labels)
	}
	if pod.Annotations[contract.AnnotationMaxRestarts] != "5" {
		t.Errorf("annotations %v", pod.Annotations)
	}
	if ctr.Resources.Requests.Cpu().String() != "2" || ctr.Resources.Limits.Cpu().String() != "3" {
		t.Errorf("cpu %v", ctr.Resources)
	}
	if !slices.Contains(envNames(ctr.Env), "FOO") || p.Properties["spark.eventLog.enabled"] != "true" {
		t.Errorf("driverEnv / extra conf missing")
	}
	if p.Properties["spark.kubernetes.driver.label."+contract.LabelResilient] != "true" {
		t.Errorf("the opt-in label is not in spark.properties")
	}
	if !maps.Equal(p.Service.Spec.Selector, pod.Labels) {
		t.Errorf("service selector %v != pod labels %v", p.Service.Spec.Selector, pod.Labels)
	}
}

func TestPlanRejectsWhatSparkRejects(t *testing.T) {
	for name, mutate := range map[string]func(*App){
		"reserved label":  func(a *App) { a.DriverLabels = map[string]string{"spark-role": "x"} },
		"driver host":     func(a *App) { a.Conf = map[string]string{"spark.driver.host": "h"} },
		"bind address":    func(a *App) { a.Conf = map[string]string{"spark.driver.bindAddress": "0.0.0.0"} },
		"unknown version": func(a *App) { a.Version = "1.6" },
	} {
		t.Run(name, func(t *testing.T) {
			app := testApp(Spark35)
			mutate(&app)
			if _, err := app.Plan(); err == nil {
				t.Errorf("Plan accepted it")
			}
		})
	}
}

func TestMemoryOverhead(t *testing.T) {
	tests := []struct {
		v    Version
		mem  int
		conf map[string]string
		want string
	}{
		{Spark35, 1024, nil, "1408Mi"}, // floor 384
		{Spark35, 4096, nil, "4505Mi"}, // int(0.1 × 4096) = 409
		{Spark35, 1024, map[string]string{"spark.driver.memoryOverhead": "100m"}, "1124Mi"}, // explicit
		{Spark35, 4096, map[string]string{"spark.driver.memoryOverheadFactor": "0.2"}, "4915Mi"},
		{Spark35, 1024, map[string]string{"spark.driver.minMemoryOverhead": "512m"}, "1408Mi"}, // 4.0+ only
		{Spark41, 1024, map[string]string{"spark.driver.minMemoryOverhead": "512m"}, "1536Mi"},
		{Spark24, 4096, map[string]string{"spark.kubernetes.memoryOverheadFactor": "0.4"}, "5734Mi"},
	}
	for _, tc := range tests {
		app := testApp(tc.v)
		app.DriverMemoryMiB = tc.mem
		app.Conf = tc.conf
		p, err := app.Plan()
		if err != nil {
			t.Fatal(err)
		}
		if got := p.DriverPod.Spec.Containers[0].Resources.Requests.Memory().String(); got != tc.want {
			t.Errorf("%s %dMiB %v: memory %s, want %s", tc.v, tc.mem, tc.conf, got, tc.want)
		}
	}
}

func TestPropertiesRoundTrip(t *testing.T) {
	in := map[string]string{
		"spark.master":   "k8s://https://kubernetes.default.svc:443",
		"spark.key with": " leading space, tab\tand = : # !",
		"spark.unicode":  "é→x",
		"spark.empty":    "",
	}
	text := storeProperties(in, "Java properties built from Kubernetes config map with name: x", fixedNow())
	if !strings.Contains(text, `spark.master=k8s\://https\://kubernetes.default.svc\:443`) {
		t.Errorf("not escaped as Java does:\n%s", text)
	}
	if !strings.HasPrefix(text, "#Java properties built from Kubernetes config map with name: x\n#Fri Jan 02 03:04:05 UTC 2026\n") {
		t.Errorf("header:\n%s", text)
	}
	out, err := loadProperties(text)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(in, out) {
		t.Errorf("round trip:\n%q\n%q", in, out)
	}
	got, err := loadProperties("! comment\n  a = 1\nb:2\nc 3\nd=multi\\\n   line\ne=\\u0041\\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"a": "1", "b": "2", "c": "3", "d": "multiline", "e": "A\n"}; !maps.Equal(got, want) {
		t.Errorf("load: %q, want %q", got, want)
	}
}
