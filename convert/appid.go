package convert

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/wrap"
)

// incarnationsAppID is the app id of placeholder p (its spark-app-selector label) when every
// incarnation of its driver is to run with an id of its own (wrap.IncarnationAppID), else "".
// S-0's driver arguments set spark.app.id=<that id>, and wrap, told the id and the pod's UID
// (downward API, expanded by the kubelet), runs the driver with the incarnation's id instead
// (docs/design.md#one-app-id-per-incarnation). An id that cannot take the suffix within a label
// value's 63 characters is left as Spark gave it, shared by every incarnation as before: a longer
// one would fail every executor's create.
func incarnationsAppID(p *corev1.Pod) string {
	id := p.Labels[contract.LabelSparkAppSelector]
	if id == "" {
		return ""
	}
	if _, err := wrap.IncarnationAppID(id, "00000000"); err != nil {
		return ""
	}
	return id
}

// podUIDEnv is contract.EnvPodUID, the pod's UID from the downward API.
func podUIDEnv() corev1.EnvVar {
	return corev1.EnvVar{Name: contract.EnvPodUID, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.uid"}}}
}
