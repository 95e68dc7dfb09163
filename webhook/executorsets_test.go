package webhook

import (
	"context"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/driverset/driverset/contract"
)

// Spark's StatefulSet executor allocator (issue 34): a DStream app's incarnations share the id
// restored from its checkpoint, so the next driver makes an executor StatefulSet of the same name,
// spark-s-<id>-<profile>, and its create fails while the lost incarnation's set is still there.
// One with no pod left (dynamic allocation scaled it to 0) holds no executor, so the set itself
// must hold the next S-0 (convert.ExecutorSetOfApp: named as Spark's are, controlled by a pod of
// S-0's name), until the garbage collector removes it. The golden pod's app has no
// executor in the cache ("quiet-driver"), so only a set can hold it; or an executor claim, which
// its next driver would reuse (ExecutorClaimsOfIncarnation).
func TestIncarnationWaitsForTheExecutorSetsAndClaimsOfEarlierIncarnations(t *testing.T) {
	const appID = "spark-8f2c1d4e6a7b4c9d8e0f1a2b3c4d5e6f"
	set := func(name, owner string, controller bool) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "analytics", UID: "uid-set"}}
		if owner != "" {
			s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: owner, UID: "uid-lost-s0", Controller: ptr.To(controller)}}
		}
		return s
	}
	// An executor claim as Spark 4's driver makes it under driverset: owned by its driver pod,
	// labelled driverset's (wrap's volume settings) when labelled is set.
	claim := func(name, owner string, labelled bool) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "analytics", UID: "uid-claim",
			Labels:          map[string]string{contract.LabelSparkAppSelector: appID},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: owner, UID: "uid-lost-s0", Controller: ptr.To(true)}}}}
		if labelled {
			c.Labels[contract.LabelDriver] = "quiet-driver"
		}
		return c
	}
	cases := []struct {
		name    string
		sets    []*appsv1.StatefulSet
		claims  []*corev1.PersistentVolumeClaim
		nilSets bool
		fail    bool
		want    verdict
		message string
	}{
		{name: "the lost incarnation's set, scaled to 0, of the restored id: held",
			sets: []*appsv1.StatefulSet{set("spark-s-"+appID+"-0", "quiet-driver-0", true)},
			want: patchedOK, message: "1 executor StatefulSet(s) of an earlier incarnation still exist (spark-s-" + appID + "-0)"},
		{name: "an incarnation's own id, cut for the allocator: held",
			sets: []*appsv1.StatefulSet{set("spark-s-spark-8f2c1d4e6a7b4c9d8e0f1a2b3c-5d1f0c8e-0", "quiet-driver-0", true)},
			want: patchedOK, message: "held by scheduling gate"},
		{name: "named for another app's id, controlled by a pod of S-0's name (a DStream resubmitted onto that app's checkpoint): held",
			sets: []*appsv1.StatefulSet{set("spark-s-spark-99999999999999999999999999-5d1f0c8e-0", "quiet-driver-0", true)},
			want: patchedOK, message: "1 executor StatefulSet(s) of an earlier incarnation still exist (spark-s-spark-99999999999999999999999999-5d1f0c8e-0)"},
		{name: "another app's set: admitted",
			sets: []*appsv1.StatefulSet{set("spark-s-spark-99999999999999999999999999-5d1f0c8e-0", "other-driver-0", true)},
			want: unchanged, message: "no executors"},
		{name: "named for this app, controlled by no pod (nothing would remove it): admitted",
			sets: []*appsv1.StatefulSet{set("spark-s-"+appID+"-0", "", false)},
			want: unchanged, message: "no executors"},
		{name: "named for this app, controlled by another pod: admitted",
			sets: []*appsv1.StatefulSet{set("spark-s-"+appID+"-0", "tenant-web-7f9c", true)},
			want: unchanged, message: "no executors"},
		// A DStream's next driver reuses any claim of its restored id, a Terminating one too.
		{name: "the lost incarnation's executor claim, labelled as driverset's: held",
			claims: []*corev1.PersistentVolumeClaim{claim("spark-exec-1-pvc-0", "quiet-driver-0", true)},
			want:   patchedOK, message: "1 executor claim(s) of an earlier incarnation still exist (spark-exec-1-pvc-0)"},
		{name: "a set and claims: held, each kind named",
			sets:   []*appsv1.StatefulSet{set("spark-s-"+appID+"-0", "quiet-driver-0", true)},
			claims: []*corev1.PersistentVolumeClaim{claim("spark-exec-1-pvc-0", "quiet-driver-0", true), claim("spark-exec-2-pvc-0", "quiet-driver-0", true)},
			want:   patchedOK, message: "1 executor StatefulSet(s) of an earlier incarnation still exist (spark-s-" + appID + "-0), and 2 executor claim(s) (spark-exec-1-pvc-0, spark-exec-2-pvc-0)"},
		{name: "an executor claim not labelled as driverset's (Spark 3.5): not looked at, admitted",
			claims: []*corev1.PersistentVolumeClaim{claim("spark-exec-1-pvc-0", "quiet-driver-0", false)},
			want:   unchanged, message: "no executors"},
		{name: "a labelled claim of another pod (the placeholder's own claim, another app's): admitted",
			claims: []*corev1.PersistentVolumeClaim{claim("spark-driver-pvc-0", "quiet-driver", true), claim("spark-exec-1-pvc-0", "other-driver-0", true)},
			want:   unchanged, message: "no executors"},
		{name: "the set cache fails: refused, to be retried", fail: true,
			want: refusedErr, message: "could not look up the executor StatefulSets of StatefulSet quiet-driver"},
		{name: "no set cache: sets are not looked at", nilSets: true,
			sets: []*appsv1.StatefulSet{set("spark-s-"+appID+"-0", "quiet-driver-0", true)},
			want: unchanged, message: "no executors"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := loadPod(t, filepath.Join("testdata", "incarnation", "spark-3.5-stale-executors.pod.yaml"))
			pod.Labels[contract.LabelDriver] = "quiet-driver"
			req := createRequest(encode(t, pod), false)
			n := &Incarnation{Reader: cacheFrom(t, filepath.Join("testdata", "incarnation", "cache.yaml"))}
			if !tc.nilSets {
				b := fake.NewClientBuilder()
				for _, s := range tc.sets {
					b.WithObjects(s)
				}
				for _, c := range tc.claims {
					b.WithObjects(c)
				}
				if tc.fail {
					failing("")(b)
				}
				n.Sets = b.Build()
			}
			checkVerdict(t, n.Handle(context.Background(), req), tc.want, tc.message)
		})
	}
}
