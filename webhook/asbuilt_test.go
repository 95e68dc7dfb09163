package webhook

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// built is a StatefulSet as driverset's builder makes it for placeholder "pi" (trimmed to what
// the rule needs: an init container, the wrapped driver, a volume, owner, labels, annotation).
func built() *appsv1.StatefulSet {
	yes := true
	selector := map[string]string{"driverset.dev/driver": "pi", "spark-role": "driver"}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: "pi", Namespace: "team-a",
			Labels:          map[string]string{"driverset.dev/driver": "pi"},
			Annotations:     map[string]string{"driverset.dev/admitted-settings": `{"driverset.dev/max-restarts":"3"}`},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "pi", UID: "uid-pi", Controller: &yes, BlockOwnerDeletion: &yes}},
		},
		Spec: appsv1.StatefulSetSpec{
			Replicas:             new(int32(1)),
			ServiceName:          "pi-ds",
			Selector:             &metav1.LabelSelector{MatchLabels: selector},
			UpdateStrategy:       appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			RevisionHistoryLimit: new(int32(2)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: selector, Finalizers: []string{"driverset.dev/outcome"}},
				Spec: corev1.PodSpec{
					ServiceAccountName: "spark",
					RestartPolicy:      corev1.RestartPolicyAlways,
					InitContainers: []corev1.Container{{
						Name: "driverset-install", Image: "driverset/driverset:v1", ImagePullPolicy: corev1.PullIfNotPresent,
						Command:      []string{"/driverset", "copy-binary", "/opt/driverset/bin/driverset"},
						VolumeMounts: []corev1.VolumeMount{{Name: "driverset", MountPath: "/opt/driverset"}},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")},
							Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")},
						},
					}},
					Containers: []corev1.Container{{
						Name: "spark-kubernetes-driver", Image: "apache/spark:3.5.6",
						Command:      []string{"/opt/driverset/bin/driverset", "wrap", "--", "/opt/entrypoint.sh"},
						Args:         []string{"driver", "--conf", "spark.driver.host=pi-0.pi-ds.team-a.svc"},
						Ports:        []corev1.ContainerPort{{Name: "driver-rpc-port", ContainerPort: 7078}},
						Env:          []corev1.EnvVar{{Name: "DRIVERSET_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
						VolumeMounts: []corev1.VolumeMount{{Name: "driverset", MountPath: "/opt/driverset"}},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
						},
						TerminationMessagePath:   corev1.TerminationMessagePathDefault,
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					}},
					Volumes: []corev1.Volume{{Name: "driverset", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
}

// asTheAPIServerDecodesIt is s with the defaults the apiserver fills in before admission.
func asTheAPIServerDecodesIt(s *appsv1.StatefulSet) *appsv1.StatefulSet {
	s = s.DeepCopy()
	s.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType}
	spec := &s.Spec.Template.Spec
	spec.DNSPolicy, spec.SchedulerName = corev1.DNSClusterFirst, corev1.DefaultSchedulerName
	spec.SecurityContext = &corev1.PodSecurityContext{}
	spec.TerminationGracePeriodSeconds = new(int64(30))
	spec.EnableServiceLinks = new(true)
	for _, c := range []*corev1.Container{&spec.InitContainers[0], &spec.Containers[0]} {
		c.TerminationMessagePath, c.TerminationMessagePolicy = corev1.TerminationMessagePathDefault, corev1.TerminationMessageReadFile
	}
	spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	spec.Containers[0].Ports[0].Protocol = corev1.ProtocolTCP
	spec.Containers[0].Env[0].ValueFrom.FieldRef.APIVersion = "v1"
	s.UID, s.ManagedFields = "", []metav1.ManagedFieldsEntry{{Manager: "driverset"}}
	return s
}

// What a StatefulSet created with driverset's token may be: what the builder makes, and nothing a
// stolen token would change in it.
func TestStatefulSetAsBuilt(t *testing.T) {
	yes := true
	driver := func(s *appsv1.StatefulSet) *corev1.Container { return &s.Spec.Template.Spec.Containers[0] }
	tests := []struct {
		name   string
		change func(s *appsv1.StatefulSet)
		want   string // "" admitted; else a part of the difference named
	}{
		{"as built", func(*appsv1.StatefulSet) {}, ""},
		{"with fewer replicas (an app that ends)", func(s *appsv1.StatefulSet) { s.Spec.Replicas = new(int32(0)) }, ""},
		{"with the apiserver's own fields in its metadata", func(s *appsv1.StatefulSet) {
			s.UID, s.ResourceVersion, s.Generation = "sts-uid", "12", 1
		}, ""},

		{"with two replicas", func(s *appsv1.StatefulSet) { s.Spec.Replicas = new(int32(2)) }, "spec.replicas is 2, driverset builds 1"},
		{"another image", func(s *appsv1.StatefulSet) { driver(s).Image = "attacker/miner" },
			`spec.template.spec.containers[0].image is "attacker/miner", driverset builds "apache/spark:3.5.6"`},
		{"another init image", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.InitContainers[0].Image = "attacker/miner" },
			"spec.template.spec.initContainers[0].image"},
		{"another command", func(s *appsv1.StatefulSet) {
			driver(s).Command = []string{"/opt/driverset/bin/driverset", "wrap", "--", "/miner"}
		},
			"spec.template.spec.containers[0].command[3]"},
		{"a container more", func(s *appsv1.StatefulSet) {
			s.Spec.Template.Spec.Containers = append(s.Spec.Template.Spec.Containers, corev1.Container{Name: "miner", Image: "attacker/miner"})
		}, "spec.template.spec.containers has 2 entries, driverset builds 1"},
		{"another ServiceAccount", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.ServiceAccountName = "namespace-admin" },
			`spec.template.spec.serviceAccountName is "namespace-admin", driverset builds "spark"`},
		{"a hostPath volume", func(s *appsv1.StatefulSet) {
			s.Spec.Template.Spec.Volumes = append(s.Spec.Template.Spec.Volumes, corev1.Volume{Name: "host",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}, "spec.template.spec.volumes has 2 entries"},
		{"the emptyDir made a hostPath", func(s *appsv1.StatefulSet) {
			s.Spec.Template.Spec.Volumes[0].EmptyDir = nil
			s.Spec.Template.Spec.Volumes[0].HostPath = &corev1.HostPathVolumeSource{Path: "/"}
		}, "spec.template.spec.volumes[0].hostPath is set, driverset builds none"},
		{"privileged", func(s *appsv1.StatefulSet) { driver(s).SecurityContext = &corev1.SecurityContext{Privileged: &yes} },
			"spec.template.spec.containers[0].securityContext is set, driverset builds none"},
		{"running as root", func(s *appsv1.StatefulSet) {
			s.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: new(int64(0))}
		}, "spec.template.spec.securityContext.runAsUser"},
		{"more resources", func(s *appsv1.StatefulSet) {
			driver(s).Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
		}, "spec.template.spec.containers[0].resources.limits"},
		// Seen first at the host port the apiserver gives each container port on the host's network.
		{"the host's network", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.HostNetwork = true },
			"spec.template.spec.containers[0].ports[0].hostPort is 7078, driverset builds 0"},
		{"the host's PIDs", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.HostPID = true }, "spec.template.spec.hostPID"},
		{"a node of its choosing", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.NodeName = "node-1" }, "spec.template.spec.nodeName"},
		{"tolerating every taint", func(s *appsv1.StatefulSet) {
			s.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}, "spec.template.spec.tolerations has 1 entries, driverset builds 0"},
		{"without the outcome finalizer", func(s *appsv1.StatefulSet) { s.Spec.Template.Finalizers = nil },
			"spec.template.metadata.finalizers"},
		{"owned by another pod of that name", func(s *appsv1.StatefulSet) { s.OwnerReferences[0].UID = "uid-other" },
			`metadata.ownerReferences[0].uid is "uid-other", driverset builds "uid-pi"`},
		{"owned by a second object", func(s *appsv1.StatefulSet) {
			s.OwnerReferences = append(s.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "x", UID: "x"})
		}, "metadata.ownerReferences has 2 entries"},
		{"another remembered setting", func(s *appsv1.StatefulSet) {
			s.Annotations["driverset.dev/admitted-settings"] = `{"driverset.dev/fence-after":"1s"}`
		}, "metadata.annotations[driverset.dev/admitted-settings]"},
		{"a label more", func(s *appsv1.StatefulSet) { s.Labels["app"] = "web" }, "metadata.labels[app] is set, driverset builds none"},
		{"a finalizer", func(s *appsv1.StatefulSet) { s.Finalizers = []string{"example.com/keep"} }, "metadata.finalizers"},
		{"another name", func(s *appsv1.StatefulSet) { s.Name = "other" }, `metadata.name is "other", driverset builds "pi"`},
		{"rolled on every template change", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{}
		}, `spec.updateStrategy.type is "RollingUpdate", driverset builds "OnDelete"`},
		{"another Service", func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "web" }, "spec.serviceName"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := built()
			got := asTheAPIServerDecodesIt(want)
			tc.change(got)
			judged(t, StatefulSetAsBuilt(got, want), tc.want)
		})
	}
}

// The apiserver's defaults are filled in on both sides: the builder's object, which leaves them
// empty, and the request, which has them. A value that is not the default is a difference.
func TestStatefulSetAsBuiltAppliesTheAPIServersDefaults(t *testing.T) {
	want := built()
	if d := StatefulSetAsBuilt(asTheAPIServerDecodesIt(want), want); d != "" {
		t.Fatalf("the defaulted object differs: %s", d)
	}
	got := asTheAPIServerDecodesIt(want)
	got.Spec.Template.Spec.TerminationGracePeriodSeconds = new(int64(3600))
	if d := StatefulSetAsBuilt(got, want); !strings.Contains(d, "terminationGracePeriodSeconds is 3600, driverset builds 30") {
		t.Fatalf("a grace period of 3600 s: %q", d)
	}
	got = asTheAPIServerDecodesIt(want)
	got.Spec.Template.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
	if d := StatefulSetAsBuilt(got, want); !strings.Contains(d, `imagePullPolicy is "Never", driverset builds "IfNotPresent"`) {
		t.Fatalf("pull policy Never: %q", d)
	}
}

// A driver's environment as Spark writes it: plain values, the pod's own fields (whose apiVersion
// the apiserver fills in) and a Secret's key (spark.kubernetes.driver.secretKeyRef.*). Each kind
// is compared as built; a value changed is a difference.
func TestStatefulSetAsBuiltWithSparksEnvironment(t *testing.T) {
	env := func(s *appsv1.StatefulSet, decoded bool) {
		c := &s.Spec.Template.Spec.Containers[0]
		podIP := &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}
		if decoded {
			podIP.APIVersion = "v1"
		}
		c.Env = append(c.Env,
			corev1.EnvVar{Name: "SPARK_USER", Value: "spark"},
			corev1.EnvVar{Name: "SPARK_DRIVER_BIND_ADDRESS", ValueFrom: &corev1.EnvVarSource{FieldRef: podIP}},
			corev1.EnvVar{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}})
	}
	want := built()
	got := asTheAPIServerDecodesIt(want)
	env(want, false)
	env(got, true)
	judged(t, StatefulSetAsBuilt(got, want), "")
	got.Spec.Template.Spec.Containers[0].Env[1].Value = "root"
	judged(t, StatefulSetAsBuilt(got, want), `spec.template.spec.containers[0].env[1].value is "root", driverset builds "spark"`)
}

// judged checks a difference d against a row's want: "" admitted, else a part of d.
func judged(t *testing.T, d, want string) {
	t.Helper()
	switch {
	case want == "" && d != "":
		t.Fatalf("refused: %s", d)
	case want != "" && d == "":
		t.Fatal("admitted")
	case !strings.Contains(d, want):
		t.Fatalf("refused for %q, want %q", d, want)
	}
}

func TestDefaultPullPolicy(t *testing.T) {
	for image, want := range map[string]corev1.PullPolicy{
		"apache/spark":                 corev1.PullAlways,
		"apache/spark:latest":          corev1.PullAlways,
		"apache/spark:3.5.6":           corev1.PullIfNotPresent,
		"registry:5000/spark":          corev1.PullAlways,
		"registry:5000/spark:3.5":      corev1.PullIfNotPresent,
		"apache/spark@sha256:0123abcd": corev1.PullIfNotPresent,
	} {
		if got := defaultPullPolicy(image); got != want {
			t.Errorf("%s: %s, want %s", image, got, want)
		}
	}
}

// The headless Service: as built, or with the fields the apiserver fills in; nothing else.
func TestServiceAsBuilt(t *testing.T) {
	yes := true
	built := func() *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{
				Name: "pi-ds", Namespace: "team-a", Labels: map[string]string{"driverset.dev/driver": "pi"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "pi", UID: "uid-pi", Controller: &yes, BlockOwnerDeletion: &yes}},
			},
			Spec: corev1.ServiceSpec{
				ClusterIP:                corev1.ClusterIPNone,
				Selector:                 map[string]string{"driverset.dev/driver": "pi", "spark-role": "driver"},
				Ports:                    []corev1.ServicePort{{Name: "driver-rpc-port", Port: 7078, TargetPort: intstr.FromInt32(7078), Protocol: corev1.ProtocolTCP}},
				PublishNotReadyAddresses: true,
			},
		}
	}
	decoded := func() *corev1.Service {
		s := built()
		s.Spec.Type, s.Spec.SessionAffinity = corev1.ServiceTypeClusterIP, corev1.ServiceAffinityNone
		s.Spec.ClusterIPs = []string{corev1.ClusterIPNone}
		s.Spec.InternalTrafficPolicy = new(corev1.ServiceInternalTrafficPolicyCluster)
		s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = []corev1.IPFamily{corev1.IPv4Protocol}, new(corev1.IPFamilyPolicySingleStack)
		return s
	}
	tests := []struct {
		name   string
		change func(s *corev1.Service)
		want   string
	}{
		{"as built", func(*corev1.Service) {}, ""},
		{"a port more", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "ssh", Port: 22})
		},
			"spec.ports has 2 entries, driverset builds 1"},
		{"a port sent elsewhere", func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(22) }, "spec.ports[0].targetPort"},
		{"selecting another workload", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "web"} }, "spec.selector[app]"},
		{"a LoadBalancer", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer }, `spec.type is "LoadBalancer", driverset builds "ClusterIP"`},
		{"an external IP", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.10"} }, "spec.externalIPs has 1 entries, driverset builds 0"},
		{"owned by another pod of that name", func(s *corev1.Service) { s.OwnerReferences[0].UID = "uid-other" }, "metadata.ownerReferences[0].uid"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := decoded()
			tc.change(got)
			judged(t, ServiceAsBuilt(got, built()), tc.want)
		})
	}
}
