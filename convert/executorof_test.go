package convert

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/driverset/driverset/contract"
)

// TestExecutorOfApp is the spec of "this executor belongs to this app", for the app whose driver
// pods are pi-driver-0 and whose placeholder is pi-driver (UID uid-p). Its driverset.dev/driver
// label names the app in every row: the label alone decides nothing.
func TestExecutorOfApp(t *testing.T) {
	const driverPod, placeholder = "pi-driver-0", types.UID("uid-p")
	executor := func(refs ...metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pi-exec-1", OwnerReferences: refs,
			Labels: map[string]string{contract.LabelDriver: "pi-driver", contract.LabelSparkRole: contract.RoleExecutor}}}
	}
	controller := func(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}
	}
	owner := func(name string, uid types.UID) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: name, UID: uid}
	}
	for _, tc := range []struct {
		name        string
		e           *corev1.Pod
		placeholder types.UID
		want        bool
	}{
		{"controlled by the running incarnation", executor(controller("v1", "Pod", "pi-driver-0", "uid-s0-now")), placeholder, true},
		{"controlled by an earlier incarnation (another UID, the same name)", executor(controller("v1", "Pod", "pi-driver-0", "uid-s0-before")), placeholder, true},
		{"controlled by the placeholder (Spark's own reference)", executor(controller("v1", "Pod", "pi-driver", "uid-p")), placeholder, true},
		{"controlled by an earlier placeholder of the same name", executor(controller("v1", "Pod", "pi-driver", "uid-p-before")), placeholder, false},
		{"placeholder unknown: its reference is not taken on the name", executor(controller("v1", "Pod", "pi-driver", "uid-p")), "", false},
		{"placeholder unknown: the driver pod's name still decides", executor(controller("v1", "Pod", "pi-driver-0", "uid-s0-before")), "", true},
		{"labelled for the app, controlled by a tenant's pod", executor(controller("v1", "Pod", "tenant-web-7f9c", "uid-tenant")), placeholder, false},
		{"labelled for the app, controlled by another app's driver pod", executor(controller("v1", "Pod", "other-driver-0", "uid-other")), placeholder, false},
		{"labelled for the app, controlled by another app's executor", executor(controller("v1", "Pod", "other-exec-3", "uid-other-exec")), placeholder, false},
		{"labelled for the app, no owner at all", executor(), placeholder, false},
		{"the driver pod's name as a non-controller owner only", executor(owner("pi-driver-0", "uid-s0-before")), placeholder, false},
		{"controlled by something else of the driver pod's name", executor(controller("apps/v1", "ReplicaSet", "pi-driver-0", "uid-rs")), placeholder, false},
		{"controlled by a pod of another API version", executor(controller("v2", "Pod", "pi-driver-0", "uid-s0-before")), placeholder, false},
	} {
		if got := ExecutorOfApp(tc.e, driverPod, tc.placeholder, "spark-abc"); got != tc.want {
			t.Errorf("%s: ExecutorOfApp = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestExecutorOfAppUnderSparksStatefulSetAllocator: with spark.kubernetes.allocation.pods.allocator=
// statefulset the executors' controller is Spark's StatefulSet spark-s-<app id>-<profile>, owned by
// the driver pod (no label; driverset's cache does not hold it). It is the app's when the id in
// its name is one of the app's incarnations' (wrap.IncarnationOf): the submitted id with an
// incarnation's suffix, cut to fit that allocator's names or not, or the submitted id itself (a
// DStream restores its first incarnation's, and an id with no room for a suffix is shared).
func TestExecutorOfAppUnderSparksStatefulSetAllocator(t *testing.T) {
	const driverPod, placeholder = "pi-driver-0", types.UID("uid-p")
	const long = "spark-92fe034a2bc24e8c941c1aee17019678"
	set := func(apiVersion, name string, controller bool) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-0", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: apiVersion, Kind: "StatefulSet", Name: name, UID: "uid-set", Controller: ptr.To(controller)}},
			Labels: map[string]string{contract.LabelDriver: "pi-driver", contract.LabelSparkRole: contract.RoleExecutor}}}
	}
	for _, tc := range []struct {
		name  string
		e     *corev1.Pod
		appID string
		want  bool
	}{
		{"an incarnation's set", set("apps/v1", "spark-s-spark-abc-3f2a9c1e-0", true), "spark-abc", true},
		{"an incarnation's set, another resource profile", set("apps/v1", "spark-s-spark-abc-3f2a9c1e-12", true), "spark-abc", true},
		{"Spark's own id: the incarnation's id cut to fit", set("apps/v1", "spark-s-spark-92fe034a2bc24e8c941c1aee17-3f2a9c1e-0", true), long, true},
		{"Spark's own id, not cut", set("apps/v1", "spark-s-"+long+"-3f2a9c1e-0", true), long, true},
		{"the submitted id itself (shared)", set("apps/v1", "spark-s-spark-abc-0", true), "spark-abc", true},
		{"another app's set", set("apps/v1", "spark-s-spark-xyz-3f2a9c1e-0", true), "spark-abc", false},
		{"an app whose id starts with this one's", set("apps/v1", "spark-s-spark-abcd-3f2a9c1e-0", true), "spark-abc", false},
		{"an id cut shorter than wrap cuts it", set("apps/v1", "spark-s-spark-92fe034a2bc24e8c941c1aee1-3f2a9c1e-0", true), long, false},
		{"a suffix that is no incarnation's", set("apps/v1", "spark-s-spark-abc-3F2A9C1E-0", true), "spark-abc", false},
		{"no resource profile", set("apps/v1", "spark-s-spark-abc-3f2a9c1e", true), "spark-abc", false},
		{"driverset's own StatefulSet", set("apps/v1", "pi-driver", true), "spark-abc", false},
		{"the app id unknown", set("apps/v1", "spark-s-spark-abc-3f2a9c1e-0", true), "", false},
		{"the set only a non-controller owner", set("apps/v1", "spark-s-spark-abc-3f2a9c1e-0", false), "spark-abc", false},
		{"a StatefulSet of another API version", set("apps/v1beta2", "spark-s-spark-abc-3f2a9c1e-0", true), "spark-abc", false},
	} {
		if got := ExecutorOfApp(tc.e, driverPod, placeholder, tc.appID); got != tc.want {
			t.Errorf("%s: ExecutorOfApp = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestExecutorSetOfApp: Spark's executor StatefulSet itself is the app's by the rule its pods are
// (TestExecutorOfAppUnderSparksStatefulSetAllocator: named for one of the app's incarnation ids),
// and by what only the set shows: its controller, a v1 Pod of the app's driver pod name (the
// incarnation that made it, whatever its UID). So the garbage collector removes every set the
// rule takes once that incarnation is gone, and none is waited for that nothing would remove.
func TestExecutorSetOfApp(t *testing.T) {
	const driverPod = "pi-driver-0"
	set := func(name string, refs ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: refs}}
	}
	driver := func(apiVersion, kind, name string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: "uid-s0-before", Controller: ptr.To(controller)}
	}
	const mine = "spark-s-spark-abc-3f2a9c1e-0"
	for _, tc := range []struct {
		name  string
		set   *metav1.PartialObjectMetadata
		appID string
		want  bool
	}{
		{"an incarnation's set, controlled by its driver pod", set(mine, driver("v1", "Pod", driverPod, true)), "spark-abc", true},
		{"the submitted id itself (a DStream's restored id)", set("spark-s-spark-abc-1", driver("v1", "Pod", driverPod, true)), "spark-abc", true},
		// A DStream app submitted again under another name onto another app's checkpoint runs
		// with that app's restored id: its sets are named for it, and controlled by its own S-0.
		{"named for another app's id (a restored one), controlled by this app's driver pod name", set("spark-s-spark-xyz-3f2a9c1e-0", driver("v1", "Pod", driverPod, true)), "spark-abc", true},
		{"named for the app, controlled by another pod", set(mine, driver("v1", "Pod", "other-driver-0", true)), "spark-abc", false},
		{"named for the app, no controller (nothing would remove it)", set(mine), "spark-abc", false},
		{"named for the app, the driver pod only an owner", set(mine, driver("v1", "Pod", driverPod, false)), "spark-abc", false},
		{"named for the app, controlled by a Pod of another API group", set(mine, driver("example.com/v1", "Pod", driverPod, true)), "spark-abc", false},
		{"driverset's own StatefulSet (controlled by the placeholder)", set("pi-driver", driver("v1", "Pod", "pi-driver", true)), "spark-abc", false},
		{"the app id unknown: the controller decides", set(mine, driver("v1", "Pod", driverPod, true)), "", true},
		{"not named as Spark names its sets, controlled by the driver pod", set("cache-0", driver("v1", "Pod", driverPod, true)), "spark-abc", false},
	} {
		if got := ExecutorSetOfApp(tc.set, driverPod); got != tc.want {
			t.Errorf("%s: ExecutorSetOfApp = %v, want %v", tc.name, got, tc.want)
		}
	}
}
