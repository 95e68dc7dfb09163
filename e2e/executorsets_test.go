//go:build testbed

package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// A DStream app under Spark's StatefulSet executor allocator (issue 34) restores its app id from
// its checkpoint, so every incarnation's driver makes an executor StatefulSet of one name,
// spark-s-<id>-<profile>, owned by its driver pod; the next driver's create fails while the lost
// one's is still there. A lost set with no pod left (dynamic allocation scaled it to 0) holds no
// executor: driverset's cache of StatefulSets' metadata must see it, the incarnations webhook
// gate the next S-0 for it and the controller lift the gate only once the garbage collector has
// removed it; so too for a set named for another app's id that a DStream resubmitted onto that
// app's checkpoint makes. The sets are kept Terminating by a finalizer of the test's own, as a
// slow garbage collector would, until released.
func TestNewIncarnationWaitsForTheLostExecutorStatefulSet(t *testing.T) {
	ctx := context.Background()
	r, appID := startGatedApp(t, "sets")
	ns := r.pod.Namespace

	// Spark's set, as StatefulSetPodsAllocator makes it, scaled to 0: no label of its own, its
	// controller the driver pod. And one named for another app's id, which a DStream app
	// submitted again under another name onto that app's checkpoint restores and names its sets
	// for.
	selector := map[string]string{contract.LabelSparkAppSelector: appID, contract.LabelSparkRole: contract.RoleExecutor}
	lostSet := func(name string) string {
		set := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
				Finalizers: []string{"e2e.driverset.dev/hold"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: r.pod.Name, UID: r.pod.UID,
					Controller: new(true), BlockOwnerDeletion: new(true)}}},
			Spec: appsv1.StatefulSetSpec{Replicas: new(int32(0)), PodManagementPolicy: appsv1.ParallelPodManagement,
				Selector: &metav1.LabelSelector{MatchLabels: selector},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: selector},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "spark-kubernetes-executor", Image: "apache/spark:3.5.6"}}}}},
		}
		if _, err := kube().AppsV1().StatefulSets(ns).Create(ctx, set, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return name
	}
	own, restored := lostSet("spark-s-"+appID+"-0"), lostSet("spark-s-spark-0123456789abcdef0123456789abcdef-0")
	release := func(name string) {
		drop := []byte(`{"metadata":{"finalizers":null}}`)
		_, _ = kube().AppsV1().StatefulSets(ns).Patch(context.Background(), name, types.MergePatchType, drop, metav1.PatchOptions{})
	}
	t.Cleanup(func() { release(restored) })
	var once sync.Once // nextIncarnationWaitsFor calls it again when the test ends
	nextIncarnationWaitsFor(t, r, "2 executor StatefulSet(s) of the previous driver", own, func() {
		once.Do(func() {
			release(own)
			// The set named for the restored id still holds it (on the code before, which took only
			// sets named for the app's own ids, the next incarnation ran here).
			time.Sleep(3 * time.Second)
			if p := getPod(t, ns, r.names.DriverPodName()); p.UID != r.pod.UID && p.Spec.NodeName != "" {
				t.Errorf("the next incarnation was scheduled on %s while %s, named for a restored id, exists", p.Spec.NodeName, restored)
			}
			release(restored)
		})
	})
}

// A DStream app's next driver reuses any claim labelled with its restored app id
// (ExecutorPodsAllocator.getReusablePVCs: no owner or deletion filter), a lost incarnation's still
// Terminating too, and the executor made with one stays Pending. Spark 4's driver labels the
// executor claims it makes as driverset's (wrap's volume settings) and owns them: the
// incarnations webhook gates the next S-0 while one is left, and the controller lifts the gate
// only once the garbage collector has removed it (after the lost S-0). The claim is kept
// Terminating by a finalizer of the test's own, as an executor still mounting it would.
func TestNewIncarnationWaitsForTheLostExecutorClaim(t *testing.T) {
	ctx := context.Background()
	r, appID := startGatedApp(t, "claims")
	ns := r.pod.Namespace

	// The claim as Spark 4.1's ExecutorPodsAllocator makes it under driverset: OnDemand's name,
	// the app id and driverset's label, its controller the driver pod.
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: r.names.StatefulSet + "-exec-1-pvc-0", Namespace: ns,
			Labels:     map[string]string{contract.LabelSparkAppSelector: appID, contract.LabelDriver: r.names.StatefulSet},
			Finalizers: []string{"e2e.driverset.dev/hold"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: r.pod.Name, UID: r.pod.UID,
				Controller: new(true), BlockOwnerDeletion: new(true)}}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}
	if _, err := kube().CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	release := func() {
		drop := []byte(`{"metadata":{"finalizers":null}}`)
		_, _ = kube().CoreV1().PersistentVolumeClaims(ns).Patch(context.Background(), claim.Name, types.MergePatchType, drop, metav1.PatchOptions{})
	}
	nextIncarnationWaitsFor(t, r, "executor claim(s) of the previous driver", claim.Name, release)
}

// startGatedApp starts an app named name in a namespace of its own, one restart allowed, and
// returns it with its app id: its next incarnation is what the gate tests hold.
func startGatedApp(t *testing.T, name string) (runningApp, string) {
	t.Helper()
	ns := namespace(t, nil)
	dumpOnFailure(t, ns)
	a := app(ns, name)
	a.DriverAnnotations = map[string]string{contract.AnnotationMaxRestarts: "1"}
	r := startApp(t, a, 0)
	appID := getPod(t, ns, r.sub.plan.DriverPodName).Labels[contract.LabelSparkAppSelector]
	if appID == "" {
		t.Fatal("the placeholder has no app id")
	}
	return r, appID
}

// nextIncarnationWaitsFor ends r's driver and checks that its next incarnation is held by the
// stale-executor gate, the placeholder saying what (what, named name), and not scheduled, until
// release lets the garbage collector finish the lost incarnation's object: then that same
// incarnation runs.
func nextIncarnationWaitsFor(t *testing.T, r runningApp, what, name string, release func()) {
	t.Helper()
	ns := r.pod.Namespace
	t.Cleanup(release)
	exitDriver(t, r.pod, 1)
	var next *corev1.Pod
	waitFor(t, 30*time.Second, "a new incarnation held by the stale-executor gate", func(ctx context.Context) (bool, error) {
		p, err := kube().CoreV1().Pods(ns).Get(ctx, r.names.DriverPodName(), metav1.GetOptions{})
		if err != nil || p.UID == r.pod.UID {
			return false, nil
		}
		next = p
		return convert.HasGate(&p.Spec, contract.GateStaleExecutors), nil
	})
	waitFor(t, 30*time.Second, "the placeholder saying what the driver waits for", func(ctx context.Context) (bool, error) {
		msg := getPod(t, ns, r.sub.plan.DriverPodName).Status.Message
		return strings.Contains(msg, what) && strings.Contains(msg, name), nil
	})
	time.Sleep(3 * time.Second)
	if p := getPod(t, ns, r.names.DriverPodName()); p.UID != next.UID || p.Spec.NodeName != "" {
		t.Fatalf("the new incarnation was scheduled (node %q) while %s of the lost incarnation exists", p.Spec.NodeName, name)
	}

	release()
	d := runningDriver(t, ns, r.names, string(r.pod.UID))
	if d.UID != next.UID {
		t.Errorf("the held incarnation %s was replaced by %s instead of released", next.UID, d.UID)
	}
}
