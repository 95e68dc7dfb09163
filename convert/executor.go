package convert

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// DriverURLUnchanged is returned by Executor when it tied the executor to its driver (owner and
// label) but could not point SPARK_DRIVER_URL at the stable name. The executor still reaches the
// driver the way Spark set it up (its Service or the pod IP), only not across a driver
// restart, so this is worth a warning, never a refusal.
type DriverURLUnchanged struct {
	// Pod is "<namespace>/<name>" of the executor.
	Pod    string
	Reason string
}

func (e *DriverURLUnchanged) Error() string {
	return fmt.Sprintf("driverset left %s of executor pod %s as it was: %s", contract.EnvDriverURL, e.Pod, e.Reason)
}

// Executor points executor pod e, in place, at the driver that runs in driverPod: a driverset
// StatefulSet pod (S-0) as the informer cache holds it (docs/design.md#the-executor-patch).
//
//   - SPARK_DRIVER_URL's host, in every container and init container that sets it to a literal
//     value, becomes the stable <S>-0.<H>.<ns>.svc; the scheme, the endpoint name and the port stay.
//     Spark 4.1's spark.kubernetes.executor.useDriverPodIP puts the driver pod's IP there: that is
//     replaced too, since the IP is the one thing a new incarnation never keeps.
//   - The controller ownerReference becomes driverPod, replacing one to another pod (the
//     placeholder, an earlier incarnation), so the executor dies with the incarnation that runs
//     it. Other, non-controller references stay.
//   - The label contract.LabelDriver=<S> is added.
//
// It is idempotent: a pod it already pointed at driverPod comes out unchanged.
//
// When driverPod is not a driverset driver pod, the two pods are in different namespaces, or e
// is controlled by something other than a pod, it returns an error and leaves e untouched. When
// SPARK_DRIVER_URL is missing, taken from elsewhere (valueFrom) or not a Spark URL, it makes the
// other two changes and returns a *DriverURLUnchanged that says why.
func Executor(e *corev1.Pod, driverPod *corev1.Pod) error {
	if e == nil || driverPod == nil {
		return errors.New("no executor pod or no driver pod")
	}
	sts := driverPod.Labels[contract.LabelDriver]
	switch {
	case sts == "" || driverPod.Labels[contract.LabelSparkRole] != contract.RoleDriver:
		return fmt.Errorf("pod %s is not a driver pod run by driverset (labels %s and %s=%s)",
			podRef(driverPod), contract.LabelDriver, contract.LabelSparkRole, contract.RoleDriver)
	case driverPod.Name == "" || driverPod.Namespace == "" || driverPod.UID == "":
		return fmt.Errorf("driver pod %s is not persisted (it needs a name, a namespace and a UID)", podRef(driverPod))
	case e.Namespace != "" && e.Namespace != driverPod.Namespace:
		// An ownerReference never crosses namespaces, and the stable name is per namespace.
		return fmt.Errorf("executor pod %s and driver pod %s are in different namespaces", podRef(e), podRef(driverPod))
	}
	refs, err := ownedByDriver(e, driverPod)
	if err != nil {
		return err
	}
	e.OwnerReferences = refs
	if e.Labels == nil {
		e.Labels = map[string]string{}
	}
	e.Labels[contract.LabelDriver] = sts

	host := contract.NamesOfStatefulSet(sts).DriverHost(driverPod.Namespace)
	found := false
	var reasons []string
	for _, cs := range [][]corev1.Container{e.Spec.InitContainers, e.Spec.Containers} {
		for i := range cs {
			for j := range cs[i].Env {
				v := &cs[i].Env[j]
				if v.Name != contract.EnvDriverURL {
					continue
				}
				found = true
				if v.ValueFrom != nil {
					reasons = append(reasons, fmt.Sprintf("container %q takes it from valueFrom, not a value", cs[i].Name))
					continue
				}
				u, err := withHost(v.Value, host)
				if err != nil {
					reasons = append(reasons, fmt.Sprintf("container %q: %v", cs[i].Name, err))
					continue
				}
				v.Value = u
			}
		}
	}
	if !found {
		reasons = append(reasons, "no container sets it")
	}
	if len(reasons) > 0 {
		return &DriverURLUnchanged{Pod: podRef(e), Reason: strings.Join(reasons, "; ")}
	}
	return nil
}

// ownedByDriver is e's ownerReferences with driverPod as the controller. A controller reference
// to driverPod itself is kept exactly as it is (the usual case: the driver JVM in S-0 names S-0);
// one to another pod is replaced in place by a reference of the shape Spark writes, keeping its
// blockOwnerDeletion: setting that where the creator did not would need its permission to update
// the owner's finalizers, which a Spark service account usually lacks, so the apiserver could
// refuse the executor.
func ownedByDriver(e *corev1.Pod, driverPod *corev1.Pod) ([]metav1.OwnerReference, error) {
	yes := true
	want := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: driverPod.Name, UID: driverPod.UID, Controller: &yes}
	refs := make([]metav1.OwnerReference, 0, len(e.OwnerReferences)+1)
	placed := false
	for _, r := range e.OwnerReferences {
		isController := r.Controller != nil && *r.Controller
		switch {
		case isController && r.UID == driverPod.UID && r.APIVersion == "v1" && r.Kind == "Pod":
			refs = append(refs, r)
			placed = true
		case isController && (r.APIVersion != "v1" || r.Kind != "Pod"):
			return nil, fmt.Errorf("executor pod %s is controlled by %s %s %q, not by a pod; driverset leaves it alone",
				podRef(e), r.APIVersion, r.Kind, r.Name)
		case isController:
			want.BlockOwnerDeletion = r.BlockOwnerDeletion
			refs = append(refs, want)
			placed = true
		case r.UID == driverPod.UID:
			// A non-controller reference to the driver would duplicate the controller one.
		default:
			refs = append(refs, r)
		}
	}
	if !placed {
		refs = append(refs, want)
	}
	return refs, nil
}

// withHost returns the Spark RPC URL raw with its host replaced. It accepts what Spark's own
// RpcEndpointAddress accepts: spark://<endpoint>@<host>:<port>, nothing else, so a value Spark
// would refuse anyway is never rewritten into something else.
func withHost(raw, host string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%q is not a URL", raw)
	}
	port := u.Port()
	if u.Scheme != "spark" || u.User == nil || u.User.Username() == "" || u.Hostname() == "" || port == "" ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("%q is not spark://<endpoint>@<host>:<port>", raw)
	}
	if _, pw := u.User.Password(); pw {
		return "", fmt.Errorf("%q is not spark://<endpoint>@<host>:<port>", raw)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%q has no valid port", raw)
	}
	// Built by hand, not with u.String(): the endpoint name and port are copied verbatim.
	return u.Scheme + "://" + u.User.Username() + "@" + net.JoinHostPort(host, port), nil
}
