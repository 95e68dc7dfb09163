package convert

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// TestCheck lists what makes a driver pod unsafe to take over; each reason says why and what to do.
func TestCheck(t *testing.T) {
	yes := true
	cases := []struct {
		name   string
		pod    func(*corev1.Pod)
		reason string // "" = convertible; else a part of the reason
	}{
		{name: "spark-submit's driver pod", reason: ""},
		{name: "renamed driver container found by its driver argument", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].Name = "main"
			p.Spec.Containers = append([]corev1.Container{{Name: "sidecar", Image: "envoy"}}, p.Spec.Containers...)
		}},
		{name: "valid annotations", pod: func(p *corev1.Pod) {
			p.Annotations = map[string]string{contract.AnnotationMaxRestarts: "0", contract.AnnotationFenceAfter: "0s", contract.AnnotationEntrypoint: "/usr/bin/run"}
		}},
		{name: "no driver container", pod: func(p *corev1.Pod) { p.Spec.Containers[0].Name, p.Spec.Containers[0].Args = "main", []string{"run"} },
			reason: `it has no container named "spark-kubernetes-driver" and no container whose first argument is "driver"`},
		{name: "driver container without args", pod: func(p *corev1.Pod) { p.Spec.Containers[0].Args = nil },
			reason: `the args of driver container "spark-kubernetes-driver" begin with nothing, not "driver"`},
		{name: "driver container args not beginning with driver", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].Args = []string{"--verbose", "driver"}
		}, reason: `begin with "--verbose", not "driver" (or Spark 2.4's "driver-py", "driver-r"); driverset adds its --conf settings right after that argument`},
		{name: "Spark 2.4 PySpark driver (driver-py)", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].Args = []string{"driver-py", "--properties-file", "/opt/spark/conf/spark.properties", "--class", "org.apache.spark.deploy.PythonRunner"}
		}},
		{name: "Spark 2.4 R driver (driver-r)", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].Args = []string{"driver-r", "--properties-file", "/opt/spark/conf/spark.properties", "--class", "org.apache.spark.deploy.RRunner"}
		}},
		{name: "renamed 2.4 PySpark driver container found by its driver-py argument", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].Name = "main"
			p.Spec.Containers[0].Args = []string{"driver-py", "--properties-file", "/opt/spark/conf/spark.properties", "--class", "org.apache.spark.deploy.PythonRunner"}
			p.Spec.Containers = append([]corev1.Container{{Name: "sidecar", Image: "envoy"}}, p.Spec.Containers...)
		}},
		{name: "an entry command Spark never wrote (executor)", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].Args = []string{"executor"}
		}, reason: `begin with "executor", not "driver"`},
		{name: "an owner that is not a Pod (TestCheckOwners has the rule)", pod: func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "sparkoperator.k8s.io/v1beta2", Kind: "SparkApplication", Name: "pi", Controller: &yes}}
		}, reason: `it is controlled by SparkApplication "pi" (sparkoperator.k8s.io/v1beta2), not by a pod`},
		{name: "bound to a node", pod: func(p *corev1.Pod) { p.Spec.NodeName = "n1" },
			reason: `spec.nodeName is set ("n1")`},
		{name: "volume named driverset", pod: func(p *corev1.Pod) { p.Spec.Volumes = []corev1.Volume{{Name: "driverset"}} },
			reason: `it already has a volume named "driverset", a name driverset reserves for itself; rename that volume`},
		{name: "init container named driverset-install", pod: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "driverset-install"}}
		}, reason: `init container named "driverset-install"`},
		{name: "driver mounts something at /opt/driverset", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "tools", MountPath: "/opt/driverset/"}}
		}, reason: `already mounts volume "tools" at /opt/driverset`},
		// Below it, a volume that outlives the pod (a claim) would carry wrap's run-once record
		// into the next incarnation, which would then never run the driver (issue 35).
		{name: "driver mounts something below /opt/driverset", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "state", MountPath: "/opt/driverset/state"}}
		}, reason: `already mounts volume "state" at /opt/driverset/state`},
		{name: "max-restarts not a number", pod: func(p *corev1.Pod) { p.Annotations = map[string]string{contract.AnnotationMaxRestarts: "three"} },
			reason: `annotation driverset.dev/max-restarts="three" is not an integer from 0 to 100`},
		{name: "max-restarts negative", pod: func(p *corev1.Pod) { p.Annotations = map[string]string{contract.AnnotationMaxRestarts: "-1"} },
			reason: `max-restarts="-1"`},
		{name: "max-restarts above 100", pod: func(p *corev1.Pod) { p.Annotations = map[string]string{contract.AnnotationMaxRestarts: "101"} },
			reason: `max-restarts="101"`},
		{name: "fence-after without unit", pod: func(p *corev1.Pod) { p.Annotations = map[string]string{contract.AnnotationFenceAfter: "120"} },
			reason: `annotation driverset.dev/fence-after="120" is not a duration of 0 or more such as "2m"`},
		{name: "fence-after negative", pod: func(p *corev1.Pod) { p.Annotations = map[string]string{contract.AnnotationFenceAfter: "-2m"} },
			reason: `fence-after="-2m"`},
		{name: "restart-window without unit", pod: func(p *corev1.Pod) { p.Annotations = map[string]string{contract.AnnotationRestartWindow: "3600"} },
			reason: `annotation driverset.dev/restart-window="3600" is not 0 or a duration from 1m to 720h such as "1h"`},
		{name: "restart-window negative", pod: func(p *corev1.Pod) { p.Annotations = map[string]string{contract.AnnotationRestartWindow: "-1h"} },
			reason: `restart-window="-1h"`},
		{name: "restart-window below 1m", pod: func(p *corev1.Pod) { p.Annotations = map[string]string{contract.AnnotationRestartWindow: "30s"} },
			reason: `restart-window="30s"`},
		{name: "restart-window above 30 days", pod: func(p *corev1.Pod) { p.Annotations = map[string]string{contract.AnnotationRestartWindow: "721h"} },
			reason: `restart-window="721h"`},
		{name: "self-fence neither on nor a duration", pod: func(p *corev1.Pod) { p.Annotations = map[string]string{contract.AnnotationSelfFence: "true"} },
			reason: `annotation driverset.dev/self-fence="true" is not "on" or a duration`},
		{name: "self-fence negative", pod: func(p *corev1.Pod) { p.Annotations = map[string]string{contract.AnnotationSelfFence: "-1m"} },
			reason: `self-fence="-1m"`},
		{name: "relative entrypoint", pod: func(p *corev1.Pod) {
			p.Annotations = map[string]string{contract.AnnotationEntrypoint: "opt/entrypoint.sh"}
		},
			reason: `annotation driverset.dev/entrypoint="opt/entrypoint.sh" is not an absolute path such as "/opt/entrypoint.sh"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := driverPod()
			if tc.pod != nil {
				tc.pod(pod)
			}
			nc, err := checkGives(t, pod, tc.reason)
			if nc == nil {
				return
			}
			if nc.Pod != "jobs/pi-0123456789abcdef-driver" {
				t.Errorf("Check: pod %q, want jobs/pi-0123456789abcdef-driver", nc.Pod)
			}
			if want := "driverset cannot take over driver pod jobs/pi-0123456789abcdef-driver: " + nc.Reason; err.Error() != want {
				t.Errorf("Error() = %q, want %q", err.Error(), want)
			}
		})
	}
}

func TestDriverContainerIndex(t *testing.T) {
	pod := driverPod()
	pod.Spec.Containers = append([]corev1.Container{{Name: "sidecar"}}, pod.Spec.Containers...)
	if i, err := DriverContainerIndex(pod); i != 1 || err != nil {
		t.Errorf("DriverContainerIndex = %d, %v; want 1", i, err)
	}
	pod.Spec.Containers[1].Name = "renamed"
	if i, err := DriverContainerIndex(pod); i != 1 || err != nil {
		t.Errorf("DriverContainerIndex (found by args) = %d, %v; want 1", i, err)
	}
	pod.Spec.Containers[1].Args = nil
	var nc *NotConvertible
	if i, err := DriverContainerIndex(pod); i != -1 || !errors.As(err, &nc) {
		t.Errorf("DriverContainerIndex without a driver = %d, %v; want -1 and a *NotConvertible", i, err)
	}
}

func TestNotConvertibleNamesAPodWithoutName(t *testing.T) {
	pod := driverPod()
	pod.Name, pod.GenerateName = "", "pi-driver-"
	pod.Spec.NodeName = "n1"
	err := Check(pod)
	if err == nil || !strings.HasPrefix(err.Error(), "driverset cannot take over driver pod jobs/pi-driver-: ") {
		t.Errorf("Check: %v, want the pod named by its generateName", err)
	}
}

func TestSettingsOf(t *testing.T) {
	cases := []struct {
		name        string
		annotations map[string]string
		want        Settings
	}{
		{name: "defaults", want: Settings{RestartWindow: time.Hour, MaxRestarts: 3, Entrypoint: "/opt/entrypoint.sh"}},
		{name: "all set", annotations: map[string]string{
			contract.AnnotationMaxRestarts: "10", contract.AnnotationFenceAfter: "2m30s", contract.AnnotationEntrypoint: "/opt/spark/entrypoint.sh",
		}, want: Settings{RestartWindow: time.Hour, MaxRestarts: 10, Entrypoint: "/opt/spark/entrypoint.sh", FenceAfter: 150 * time.Second}},
		{name: "no restarts, fencing off", annotations: map[string]string{contract.AnnotationMaxRestarts: "0", contract.AnnotationFenceAfter: "0"},
			want: Settings{RestartWindow: time.Hour, MaxRestarts: 0, Entrypoint: "/opt/entrypoint.sh"}},
		{name: "the most restarts", annotations: map[string]string{contract.AnnotationMaxRestarts: "100"},
			want: Settings{RestartWindow: time.Hour, MaxRestarts: 100, Entrypoint: "/opt/entrypoint.sh"}},
		{name: "restart-window 0: never forget", annotations: map[string]string{contract.AnnotationRestartWindow: "0"},
			want: Settings{MaxRestarts: 3, Entrypoint: "/opt/entrypoint.sh"}},
		{name: "restart-window bounds", annotations: map[string]string{contract.AnnotationRestartWindow: "1m"},
			want: Settings{RestartWindow: time.Minute, MaxRestarts: 3, Entrypoint: "/opt/entrypoint.sh"}},
		{name: "restart-window upper bound", annotations: map[string]string{contract.AnnotationRestartWindow: "720h"},
			want: Settings{RestartWindow: 720 * time.Hour, MaxRestarts: 3, Entrypoint: "/opt/entrypoint.sh"}},
		{name: "self-fence on: the default T", annotations: map[string]string{contract.AnnotationSelfFence: "on"},
			want: Settings{RestartWindow: time.Hour, MaxRestarts: 3, Entrypoint: "/opt/entrypoint.sh", SelfFence: contract.DefaultSelfFence}},
		{name: "self-fence with its T", annotations: map[string]string{contract.AnnotationSelfFence: "45s"},
			want: Settings{RestartWindow: time.Hour, MaxRestarts: 3, Entrypoint: "/opt/entrypoint.sh", SelfFence: 45 * time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := driverPod()
			pod.Annotations = tc.annotations
			got, err := SettingsOf(pod)
			if err != nil || got != tc.want {
				t.Errorf("SettingsOf = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// checkGives runs Check on pod and fails the test unless it answers as reason says: convertible
// for "", else a *NotConvertible whose reason contains reason, which it returns with the error
// (nil for a convertible pod).
func checkGives(t *testing.T, pod *corev1.Pod, reason string) (*NotConvertible, error) {
	t.Helper()
	err := Check(pod)
	if reason == "" {
		if err != nil {
			t.Fatalf("Check: %v, want convertible", err)
		}
		return nil, nil
	}
	var nc *NotConvertible
	if !errors.As(err, &nc) {
		t.Fatalf("Check: %v, want a *NotConvertible", err)
	}
	if !strings.Contains(nc.Reason, reason) {
		t.Errorf("reason %q, want one containing %q", nc.Reason, reason)
	}
	return nc, err
}
