// Package convert holds every decision about turning a Spark driver pod into driverset's objects:
// whether a pod can be taken over (Check), the gated placeholder it becomes (ToPlaceholder), and the
// StatefulSet and headless Service built from that placeholder. Everything here is pure: no API
// calls, the same input always gives the same output, so the webhook and the controller can share it.
package convert

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/wrap"
)

// Names and paths driverset adds to the driver's pod template. Check refuses pods that already use
// them: the template would otherwise carry two volumes, containers or mounts of the same name/path,
// which the apiserver rejects only later, when the controller creates the StatefulSet.
const (
	// VolumeName is the emptyDir that carries the driverset binary and the wrapper's state.
	VolumeName = "driverset"
	// MountPath is where VolumeName is mounted in the init container and the driver container.
	MountPath = "/opt/driverset"
	// InstallContainerName is the init container that copies the binary into VolumeName.
	InstallContainerName = "driverset-install"
	// BinaryPath is where the driver container finds the driverset binary.
	BinaryPath = MountPath + "/bin/driverset"
	// StateDir is where `driverset wrap` records the driver's exit; it survives container restarts.
	// wrap's own default, so the template and the wrapper cannot disagree; it lies in MountPath.
	StateDir = wrap.DefaultStateDir
)

// NotConvertible is returned when a driver cannot be taken over safely. Reason is shown to the
// user verbatim in the admission denial, so it says why and what to do.
type NotConvertible struct {
	// Pod is "<namespace>/<name>", or the generateName when the pod has no name yet.
	Pod    string
	Reason string
	// NotSparkSubmit is true when the pod is not a driver pod of spark-submit --deploy-mode cluster
	// at all: an operator's or another controller's (any owner that is not a Pod, or the Kubeflow
	// operator's label), or one whose driver container does not run Spark's "driver" entry (a
	// client-mode driver). The namespace policy leaves such a pod alone; the reasons without it are
	// a cluster driver that cannot be held safely.
	NotSparkSubmit bool
}

func (e *NotConvertible) Error() string {
	return fmt.Sprintf("driverset cannot take over driver pod %s: %s", e.Pod, e.Reason)
}

func notConvertible(pod *corev1.Pod, format string, args ...any) *NotConvertible {
	return &NotConvertible{Pod: podRef(pod), Reason: fmt.Sprintf(format, args...)}
}

// notSparkSubmit is notConvertible for a pod that is not spark-submit's cluster driver.
func notSparkSubmit(pod *corev1.Pod, format string, args ...any) *NotConvertible {
	nc := notConvertible(pod, format, args...)
	nc.NotSparkSubmit = true
	return nc
}

func podRef(pod *corev1.Pod) string {
	name := pod.Name
	if name == "" {
		name = pod.GenerateName
	}
	if pod.Namespace == "" {
		return name
	}
	return pod.Namespace + "/" + name
}

// Check reports whether pod, a Spark driver pod as spark-submit posts it, can be converted. It
// returns a *NotConvertible naming the first reason it cannot, or nil.
func Check(pod *corev1.Pod) error {
	if err := checkShape(pod); err != nil {
		return err
	}
	_, err := SettingsOf(pod)
	return err
}

// DriverContainerIndex is the index in pod.Spec.Containers of the container that runs the Spark
// driver: the one Spark names, else the first whose first argument starts a driver (IsDriverEntry;
// a pod template may rename it). It returns a *NotConvertible when there is none.
func DriverContainerIndex(pod *corev1.Pod) (int, error) {
	if i := driverContainer(pod); i >= 0 {
		return i, nil
	}
	return -1, notSparkSubmit(pod, "it has no container named %q and no container whose first argument is %q; "+
		"driverset converts only driver pods made by spark-submit --deploy-mode cluster",
		contract.DriverContainerName, contract.RoleDriver)
}

// checkShape is Check without the annotations: what building the StatefulSet relies on.
func checkShape(pod *corev1.Pod) error {
	if pod == nil {
		return &NotConvertible{Pod: "<nil>", Reason: "no pod"}
	}
	i, err := DriverContainerIndex(pod)
	if err != nil {
		return err
	}
	c := &pod.Spec.Containers[i]
	if len(c.Args) == 0 || !IsDriverEntry(c.Args[0]) {
		first := "nothing"
		if len(c.Args) > 0 {
			first = fmt.Sprintf("%q", c.Args[0])
		}
		return notSparkSubmit(pod, "the args of driver container %q begin with %s, not %q (or Spark 2.4's %q, %q); driverset adds its "+
			"--conf settings right after that argument, so keep the args spark-submit generates", c.Name, first, contract.RoleDriver, EntryDriverPy, EntryDriverR)
	}
	if nc := operatorOf(pod); nc != nil {
		return nc
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		// Only a Pod is left here (operatorOf took every other owner). A Pod that owns the driver
		// without controlling it is the pod spark-submit ran in; nothing known makes one its
		// controller, and a controller manages its pods, so that stays refused.
		return notSparkSubmit(pod, "it is already controlled by %s %q; driverset takes over only driver pods that "+
			"spark-submit creates itself", ref.Kind, ref.Name)
	}
	if pod.Spec.NodeName != "" {
		// The apiserver refuses scheduling gates on a pod created with nodeName, so it could never be
		// held as a placeholder.
		return notConvertible(pod, "spec.nodeName is set (%q) and a pod bound to a node cannot be held back; "+
			"choose the node with a nodeSelector or node affinity instead", pod.Spec.NodeName)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == VolumeName {
			return notConvertible(pod, "it already has a volume named %q, a name driverset reserves for itself; rename that volume", VolumeName)
		}
	}
	for _, ic := range pod.Spec.InitContainers {
		if ic.Name == InstallContainerName {
			return notConvertible(pod, "it already has an init container named %q, a name driverset reserves for itself; rename that container", InstallContainerName)
		}
	}
	for _, m := range c.VolumeMounts {
		// Below it too: a volume that outlives the pod would carry wrap's run-once record (StateDir)
		// into the next incarnation, which would then never run the driver.
		if p := path.Clean(m.MountPath); p == MountPath || strings.HasPrefix(p, MountPath+"/") {
			return notConvertible(pod, "driver container %q already mounts volume %q at %s, where driverset installs itself; mount it elsewhere",
				c.Name, m.Name, p)
		}
	}
	return nil
}

// driverContainer is the index of the container that runs the Spark driver, or -1: the one Spark
// names, else the first whose first argument starts a driver (a pod template may rename it).
func driverContainer(pod *corev1.Pod) int {
	for i, c := range pod.Spec.Containers {
		if c.Name == contract.DriverContainerName {
			return i
		}
	}
	for i, c := range pod.Spec.Containers {
		if len(c.Args) > 0 && IsDriverEntry(c.Args[0]) {
			return i
		}
	}
	return -1
}
