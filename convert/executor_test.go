package convert

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
)

const (
	exNamespace   = "analytics"
	exPlaceholder = "spark-pi-8e3c5a1f0b7d2e49-driver"
	exDriverPod   = exPlaceholder + "-0"
	// exStableURL is the URL every executor of exDriverPod must end up with.
	exStableURL = "spark://CoarseGrainedScheduler@spark-pi-8e3c5a1f0b7d2e49-driver-0.spark-pi-8e3c5a1f0b7d2e49-driver-ds.analytics.svc:7078"
	exSparkSvc  = "spark://CoarseGrainedScheduler@spark-pi-8e3c5a1f0b7d2e49-driver-svc.analytics.svc:7078"
)

// exS0 is the StatefulSet's driver pod as the informer cache holds it.
func exS0() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: exDriverPod, Namespace: exNamespace, UID: "uid-s0-incarnation-2",
		Labels: map[string]string{
			contract.LabelDriver:           exPlaceholder,
			contract.LabelSparkRole:        contract.RoleDriver,
			contract.LabelSparkAppSelector: "spark-8f2c1d4e6a7b4c9d8e0f1a2b3c4d5e6f",
		},
	}}
}

func podOwner(name string, uid types.UID) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: name, UID: uid, Controller: &yes}
}

func exEnv(url string) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: contract.EnvDriverURL, Value: url},
		{Name: "SPARK_EXECUTOR_ID", Value: "1"},
		{Name: "SPARK_APPLICATION_ID", Value: "spark-8f2c1d4e6a7b4c9d8e0f1a2b3c4d5e6f"},
	}
}

// Executor pods as each Spark version's driver posts them (docs/spark-facts.md §3), owned by owner.
func executor35(url string, owner metav1.OwnerReference) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "spark-pi-8e3c5a1f0b7d2e49-exec-1", Namespace: exNamespace,
			Labels: map[string]string{
				contract.LabelSparkAppSelector:  "spark-8f2c1d4e6a7b4c9d8e0f1a2b3c4d5e6f",
				contract.LabelSparkRole:         contract.RoleExecutor,
				"spark-exec-id":                 "1",
				"spark-exec-resourceprofile-id": "0",
			},
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "spark-kubernetes-executor", Image: "apache/spark:3.5.3", Args: []string{"executor"},
				Env: append(exEnv(url), corev1.EnvVar{Name: "SPARK_EXECUTOR_POD_IP",
					ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}),
			}},
		},
	}
}

// executor24: 2.4 names the container "executor" and has no resource-profile label.
func executor24(url string, owner metav1.OwnerReference) *corev1.Pod {
	p := executor35(url, owner)
	delete(p.Labels, "spark-exec-resourceprofile-id")
	p.Name = "spark-pi-1700000000000-exec-1"
	p.Spec.Containers[0].Name, p.Spec.Containers[0].Image = "executor", "apache/spark:v2.4.8"
	return p
}

func executor41(url string, owner metav1.OwnerReference) *corev1.Pod {
	p := executor35(url, owner)
	p.Spec.Containers[0].Image = "apache/spark:4.1.0"
	return p
}

// TestExecutor is convert.Executor's contract, one row per rule.
func TestExecutor(t *testing.T) {
	s0 := podOwner(exDriverPod, "uid-s0-incarnation-2")
	placeholder := podOwner(exPlaceholder, "uid-placeholder")
	type outcome int
	const (
		pointed      outcome = iota // nil error
		urlUnchanged                // *DriverURLUnchanged: owner and label set, URL as it was
		refused                     // another error, the pod untouched
	)
	cases := []struct {
		name   string
		pod    *corev1.Pod
		driver func(*corev1.Pod)
		want   outcome
		// The expected SPARK_DRIVER_URL of each container (by name) and the ownerReferences.
		urls   map[string]string
		owners []metav1.OwnerReference
		reason string // part of the error message
	}{
		{name: "3.5 executor of S-0 already on the stable name: only the label is added",
			pod: executor35(exStableURL, s0), urls: map[string]string{"spark-kubernetes-executor": exStableURL},
			owners: []metav1.OwnerReference{s0}},
		{name: "3.5 executor owned by the placeholder via Spark's Service moves to S-0",
			pod: executor35(exSparkSvc, placeholder), urls: map[string]string{"spark-kubernetes-executor": exStableURL},
			owners: []metav1.OwnerReference{s0}},
		{name: "2.4 executor owned by the placeholder moves to S-0",
			pod: executor24(exSparkSvc, placeholder), urls: map[string]string{"executor": exStableURL},
			owners: []metav1.OwnerReference{s0}},
		{name: "4.1 useDriverPodIP: the driver pod's IP becomes the stable name",
			pod: executor41("spark://CoarseGrainedScheduler@10.244.1.7:7078", s0), urls: map[string]string{"spark-kubernetes-executor": exStableURL},
			owners: []metav1.OwnerReference{s0}},
		{name: "4.1 useDriverPodIP with an IPv6 pod IP",
			pod: executor41("spark://CoarseGrainedScheduler@[fd00:10:244::7]:7078", s0), urls: map[string]string{"spark-kubernetes-executor": exStableURL},
			owners: []metav1.OwnerReference{s0}},
		{name: "a non-default driver port is kept",
			pod:  executor35("spark://CoarseGrainedScheduler@10.244.1.7:35000", s0),
			urls: map[string]string{"spark-kubernetes-executor": strings.Replace(exStableURL, ":7078", ":35000", 1)}, owners: []metav1.OwnerReference{s0}},
		{name: "an owner from an earlier incarnation of S-0 is replaced",
			pod:  executor35(exStableURL, podOwner(exDriverPod, "uid-s0-incarnation-1")),
			urls: map[string]string{"spark-kubernetes-executor": exStableURL}, owners: []metav1.OwnerReference{s0}},
		{name: "the replaced reference's blockOwnerDeletion is kept, never added",
			pod: func() *corev1.Pod {
				yes := true
				o := placeholder
				o.BlockOwnerDeletion = &yes
				return executor35(exSparkSvc, o)
			}(),
			urls: map[string]string{"spark-kubernetes-executor": exStableURL},
			owners: func() []metav1.OwnerReference {
				yes := true
				o := s0
				o.BlockOwnerDeletion = &yes
				return []metav1.OwnerReference{o}
			}()},
		{name: "non-controller references stay; a second one to S-0 is dropped",
			pod: func() *corev1.Pod {
				p := executor35(exSparkSvc, placeholder)
				p.OwnerReferences = []metav1.OwnerReference{
					{APIVersion: "v1", Kind: "ConfigMap", Name: "keep-me", UID: "uid-cm"},
					placeholder,
					{APIVersion: "v1", Kind: "Pod", Name: exDriverPod, UID: "uid-s0-incarnation-2"},
				}
				return p
			}(),
			urls:   map[string]string{"spark-kubernetes-executor": exStableURL},
			owners: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "keep-me", UID: "uid-cm"}, s0}},
		{name: "an executor without any owner gets S-0",
			pod: func() *corev1.Pod {
				p := executor35(exSparkSvc, s0)
				p.OwnerReferences = nil
				return p
			}(),
			urls: map[string]string{"spark-kubernetes-executor": exStableURL}, owners: []metav1.OwnerReference{s0}},
		{name: "every container that sets the URL is pointed, a sidecar without it is not touched",
			pod: func() *corev1.Pod {
				p := executor35(exSparkSvc, s0)
				p.Spec.InitContainers = []corev1.Container{{Name: "warmup", Env: exEnv("spark://CoarseGrainedScheduler@10.244.1.7:7078")}}
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "log-shipper"})
				return p
			}(),
			urls:   map[string]string{"warmup": exStableURL, "spark-kubernetes-executor": exStableURL, "log-shipper": ""},
			owners: []metav1.OwnerReference{s0}},
		{name: "no SPARK_DRIVER_URL: tied to S-0, reported",
			pod: func() *corev1.Pod {
				p := executor35(exSparkSvc, placeholder)
				p.Spec.Containers[0].Env = p.Spec.Containers[0].Env[1:]
				return p
			}(),
			want: urlUnchanged, urls: map[string]string{"spark-kubernetes-executor": ""}, owners: []metav1.OwnerReference{s0},
			reason: "no container sets it"},
		{name: "SPARK_DRIVER_URL from valueFrom is left",
			pod: func() *corev1.Pod {
				p := executor35("", placeholder)
				p.Spec.Containers[0].Env[0].ValueFrom = &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "urls"}, Key: "driver"}}
				return p
			}(),
			want: urlUnchanged, urls: map[string]string{"spark-kubernetes-executor": ""}, owners: []metav1.OwnerReference{s0},
			reason: `container "spark-kubernetes-executor" takes it from valueFrom`},
		{name: "host:port without scheme is left", pod: executor35("driver-svc:7078", s0), want: urlUnchanged,
			urls: map[string]string{"spark-kubernetes-executor": "driver-svc:7078"}, owners: []metav1.OwnerReference{s0},
			reason: `"driver-svc:7078" is not spark://<endpoint>@<host>:<port>`},
		{name: "another scheme is left", pod: executor35("akka.tcp://sparkDriver@driver-svc:7078", s0), want: urlUnchanged,
			urls: map[string]string{"spark-kubernetes-executor": "akka.tcp://sparkDriver@driver-svc:7078"}, owners: []metav1.OwnerReference{s0},
			reason: "is not spark://"},
		{name: "no endpoint name is left", pod: executor35("spark://10.244.1.7:7078", s0), want: urlUnchanged,
			urls: map[string]string{"spark-kubernetes-executor": "spark://10.244.1.7:7078"}, owners: []metav1.OwnerReference{s0}},
		{name: "no port is left", pod: executor35("spark://CoarseGrainedScheduler@10.244.1.7", s0), want: urlUnchanged,
			urls: map[string]string{"spark-kubernetes-executor": "spark://CoarseGrainedScheduler@10.244.1.7"}, owners: []metav1.OwnerReference{s0}},
		{name: "the lowest port, 1, is kept",
			pod:  executor35("spark://CoarseGrainedScheduler@10.244.1.7:1", s0),
			urls: map[string]string{"spark-kubernetes-executor": strings.Replace(exStableURL, ":7078", ":1", 1)}, owners: []metav1.OwnerReference{s0}},
		{name: "the highest port, 65535, is kept",
			pod:  executor35("spark://CoarseGrainedScheduler@10.244.1.7:65535", s0),
			urls: map[string]string{"spark-kubernetes-executor": strings.Replace(exStableURL, ":7078", ":65535", 1)}, owners: []metav1.OwnerReference{s0}},
		{name: "port 0 is left", pod: executor35("spark://CoarseGrainedScheduler@10.244.1.7:0", s0), want: urlUnchanged,
			urls: map[string]string{"spark-kubernetes-executor": "spark://CoarseGrainedScheduler@10.244.1.7:0"}, owners: []metav1.OwnerReference{s0},
			reason: "has no valid port"},
		{name: "a fragment is left", pod: executor35("spark://CoarseGrainedScheduler@10.244.1.7:7078#x", s0), want: urlUnchanged,
			urls: map[string]string{"spark-kubernetes-executor": "spark://CoarseGrainedScheduler@10.244.1.7:7078#x"}, owners: []metav1.OwnerReference{s0},
			reason: "is not spark://"},
		{name: "a port out of range is left", pod: executor35("spark://CoarseGrainedScheduler@10.244.1.7:70780", s0), want: urlUnchanged,
			urls: map[string]string{"spark-kubernetes-executor": "spark://CoarseGrainedScheduler@10.244.1.7:70780"}, owners: []metav1.OwnerReference{s0},
			reason: "no valid port"},
		{name: "a path is left", pod: executor35("spark://CoarseGrainedScheduler@10.244.1.7:7078/x", s0), want: urlUnchanged,
			urls: map[string]string{"spark-kubernetes-executor": "spark://CoarseGrainedScheduler@10.244.1.7:7078/x"}, owners: []metav1.OwnerReference{s0}},
		{name: "not a URL at all is left", pod: executor35("spark://%zz@x:1", s0), want: urlUnchanged,
			urls: map[string]string{"spark-kubernetes-executor": "spark://%zz@x:1"}, owners: []metav1.OwnerReference{s0},
			reason: "is not a URL"},
		{name: "an executor controlled by a Job is refused", pod: executor35(exSparkSvc, func() metav1.OwnerReference {
			o := podOwner("nightly", "uid-job")
			o.APIVersion, o.Kind = "batch/v1", "Job"
			return o
		}()), want: refused, reason: `controlled by batch/v1 Job "nightly", not by a pod`},
		// Either half of "a core v1 Pod" missing is enough to refuse: a v1 kind that is no Pod, and
		// a kind named Pod in another API group.
		{name: "an executor controlled by a v1 ReplicationController is refused", pod: executor35(exSparkSvc, func() metav1.OwnerReference {
			o := podOwner("rc", "uid-rc")
			o.Kind = "ReplicationController"
			return o
		}()), want: refused, reason: `controlled by v1 ReplicationController "rc", not by a pod`},
		{name: "an executor controlled by a Pod of another API group is refused", pod: executor35(exSparkSvc, func() metav1.OwnerReference {
			o := podOwner("pod-like", "uid-pod-like")
			o.APIVersion = "example.com/v1"
			return o
		}()), want: refused, reason: `controlled by example.com/v1 Pod "pod-like", not by a pod`},
		{name: "another app's driver (no driverset label) is refused", pod: executor35(exSparkSvc, placeholder),
			driver: func(d *corev1.Pod) { delete(d.Labels, contract.LabelDriver) }, want: refused, reason: "is not a driver pod run by driverset"},
		{name: "a driverset executor as the driver is refused", pod: executor35(exSparkSvc, placeholder),
			driver: func(d *corev1.Pod) { d.Labels[contract.LabelSparkRole] = contract.RoleExecutor }, want: refused, reason: "is not a driver pod run by driverset"},
		{name: "a driver pod without a UID is refused", pod: executor35(exSparkSvc, placeholder),
			driver: func(d *corev1.Pod) { d.UID = "" }, want: refused, reason: "is not persisted"},
		{name: "a driver pod without a namespace is refused", pod: executor35(exSparkSvc, placeholder),
			driver: func(d *corev1.Pod) { d.Namespace = "" }, want: refused, reason: "is not persisted"},
		{name: "a driver in another namespace is refused", pod: executor35(exSparkSvc, placeholder),
			driver: func(d *corev1.Pod) { d.Namespace = "elsewhere" }, want: refused, reason: "different namespaces"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			driver := exS0()
			if tc.driver != nil {
				tc.driver(driver)
			}
			pod := tc.pod.DeepCopy()
			err := Executor(pod, driver)
			var unchanged *DriverURLUnchanged
			switch tc.want {
			case pointed:
				if err != nil {
					t.Fatalf("Executor: %v, want nil", err)
				}
			case urlUnchanged:
				if !errors.As(err, &unchanged) {
					t.Fatalf("Executor: %v, want a *DriverURLUnchanged", err)
				}
			case refused:
				if err == nil || errors.As(err, &unchanged) {
					t.Fatalf("Executor: %v, want a refusal", err)
				}
				if !reflect.DeepEqual(pod, tc.pod) {
					t.Errorf("a refused executor was changed:\n got %+v\nwant %+v", pod, tc.pod)
				}
			}
			if tc.reason != "" && (err == nil || !strings.Contains(err.Error(), tc.reason)) {
				t.Errorf("error %v, want one containing %q", err, tc.reason)
			}
			if tc.want == refused {
				return
			}
			if got := pod.Labels[contract.LabelDriver]; got != exPlaceholder {
				t.Errorf("label %s = %q, want %q", contract.LabelDriver, got, exPlaceholder)
			}
			if !reflect.DeepEqual(pod.OwnerReferences, tc.owners) {
				t.Errorf("ownerReferences\n got %+v\nwant %+v", pod.OwnerReferences, tc.owners)
			}
			for name, want := range tc.urls {
				if got := driverURL(pod, name); got != want {
					t.Errorf("container %q: %s = %q, want %q", name, contract.EnvDriverURL, got, want)
				}
			}
			// Only the URL, the label and the owners change: everything else is as Spark made it.
			rest, orig := pod.DeepCopy(), tc.pod.DeepCopy()
			for _, p := range []*corev1.Pod{rest, orig} {
				p.OwnerReferences = nil
				delete(p.Labels, contract.LabelDriver)
				for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
					for i := range cs {
						for j := range cs[i].Env {
							if cs[i].Env[j].Name == contract.EnvDriverURL {
								cs[i].Env[j].Value = ""
							}
						}
					}
				}
			}
			if !reflect.DeepEqual(rest, orig) {
				t.Errorf("Executor changed more than the URL, the label and the owners:\n got %+v\nwant %+v", rest, orig)
			}

			t.Run("idempotent", func(t *testing.T) {
				again := pod.DeepCopy()
				err2 := Executor(again, driver)
				if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
					t.Errorf("second call: %v, first: %v", err2, err)
				}
				if !reflect.DeepEqual(again, pod) {
					t.Errorf("second call changed the pod:\n got %+v\nwant %+v", again, pod)
				}
			})
		})
	}
}

func TestExecutorNil(t *testing.T) {
	if err := Executor(nil, exS0()); err == nil {
		t.Error("Executor(nil, S-0) = nil, want an error")
	}
	if err := Executor(executor35(exSparkSvc, podOwner(exPlaceholder, "uid")), nil); err == nil {
		t.Error("Executor(e, nil) = nil, want an error")
	}
}

// driverURL is the SPARK_DRIVER_URL value of the named container, or "" when it has none.
func driverURL(p *corev1.Pod, container string) string {
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if c.Name != container {
				continue
			}
			for _, e := range c.Env {
				if e.Name == contract.EnvDriverURL {
					return e.Value
				}
			}
		}
	}
	return ""
}
