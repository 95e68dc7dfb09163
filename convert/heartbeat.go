package convert

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/wrap"
)

// keepHeartbeat makes the wrapped driver container c keep the heartbeat Lease lease with T (wrap's
// flags, before the "--" that ends them), and gives wrap the pod's UID and namespace (downward
// API): the UID is the heartbeat's holder, the namespace the Lease's.
func keepHeartbeat(c *corev1.Container, lease string, t time.Duration) {
	sep := slices.Index(c.Command, "--")
	flags := []string{"--" + wrap.FlagHeartbeatLease, lease, "--" + wrap.FlagSelfFence, t.String()}
	c.Command = slices.Insert(c.Command, sep, flags...)
	var env []corev1.EnvVar
	for _, e := range c.Env {
		if e.Name != contract.EnvPodUID && e.Name != contract.EnvPodNamespace {
			env = append(env, e)
		}
	}
	env = append(env,
		podUIDEnv(),
		corev1.EnvVar{Name: contract.EnvPodNamespace, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}},
	)
	c.Env = env
}
