//go:build testbed

package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/spark"
)

// TestRealSparkExecutorClaimsThroughNodeLoss (issue 34, "PVC reuse"): a real Spark 3.5.6 batch
// job whose executors each get an OnDemand claim (spark-submit's default since 3.4: the driver
// owns them and reuses, by app id, those no executor uses), its executors kept off the drivers'
// nodes, its driver's node killed mid-job and declared out of service. Spark lists reusable claims
// by spark-app-selector=<app id> with no owner or deletion filter, so a driver that shared its id
// with the lost incarnation could take a claim the garbage collector is deleting. Each incarnation
// runs with an id of its own, so the next driver must never mount a claim of the lost one: every
// executor of the next incarnation mounts claims labelled with its own id, the job finishes once,
// and the lost incarnation's claims are deleted.
func TestRealSparkExecutorClaimsThroughNodeLoss(t *testing.T) {
	c := newClaimsCase(t, "3.5.6", 6, corev1.ReadWriteOnce)
	d, ns, pods, claims := c.d, c.ns, c.pods, c.claims
	r := runSparkJob(t, d, sparkJob{resilient: true, namespace: ns, conf: c.conf}, killDriverNodeMidJob)
	pods.stop()
	claims.stop()
	r.expectSucceeded(t)
	ids := r.attempts()
	t.Logf("app ids of the driver JVMs: %v", ids)
	seen := claims.seen()
	appOf := map[string]string{}
	for _, c := range seen {
		appOf[c.name] = c.app
		t.Logf("claim %s (app %s), owned by %s: created %s, delete seen %s, gone %s", c.name, c.app, c.owner,
			c.first.Format("15:04:05.0"), stamp(c.deleting), stamp(c.gone))
	}
	if len(ids) != 2 {
		r.logDrivers(t)
		t.Fatalf("want the driver started twice (before and after its node died), saw %v", ids)
	}
	expectOwnAppIDs(t, ids)
	mounted := map[string]int{}
	for _, e := range pods.executors() {
		t.Logf("executor %s (app %s) on %s mounts %v", e.name, e.appID, e.node, e.claims)
		for _, c := range e.claims {
			mounted[e.appID]++
			if appOf[c] != e.appID {
				t.Errorf("executor %s of app %s mounts claim %s of app %q", e.name, e.appID, c, appOf[c])
			}
		}
	}
	for _, id := range ids {
		if mounted[id] == 0 {
			t.Errorf("no executor of incarnation %s mounted a claim: nothing shown", id)
		}
	}
	for _, c := range seen {
		if c.app == ids[0] && c.gone.IsZero() {
			t.Errorf("claim %s of the lost incarnation was never deleted", c.name)
		}
	}
}

// claimsCase is an executor-claims case of make e2e-spark-alloc: Spark d, the app's namespace, the
// settings that give each executor an OnDemand claim (at /data, of local volumes made for it) and
// keep the executors off the drivers' nodes, and the pods' watch and the claims' poll, started.
type claimsCase struct {
	d      spark.Dist
	ns     string
	conf   map[string]string
	pods   *podWatch
	claims *claimPoll
}

// newClaimsCase prepares one on Spark version with n local volumes of access mode mode (skipped
// outside make e2e-spark-alloc, or when the version is not among the images).
func newClaimsCase(t *testing.T, version string, n int, mode corev1.PersistentVolumeAccessMode) claimsCase {
	t.Helper()
	if os.Getenv(sparkAllocEnv) == "" {
		t.Skipf("a make e2e-spark-alloc case (%s=1)", sparkAllocEnv)
	}
	d, err := spark.Find(bed.images.spark, version)
	if err != nil {
		t.Skipf("Spark %s is not among the images: %v", version, err)
	}
	ns := namespace(t, nil)
	class := localVolumes(t, n, mode)
	template := filepath.Join(t.TempDir(), "executor.yaml")
	if err := os.WriteFile(template, []byte(executorAntiAffinity), 0o644); err != nil {
		t.Fatal(err)
	}
	const claim = "spark.kubernetes.executor.volumes.persistentVolumeClaim.data."
	conf := map[string]string{
		claim + "options.claimName":                 "OnDemand",
		claim + "options.storageClass":              class,
		claim + "options.sizeLimit":                 "1Gi",
		claim + "mount.path":                        "/data",
		"spark.kubernetes.executor.podTemplateFile": template,
	}
	return claimsCase{d: d, ns: ns, conf: conf, pods: watchPods(t, ns), claims: pollClaims(t, ns)}
}

func stamp(at time.Time) string {
	if at.IsZero() {
		return "never"
	}
	return at.Format("15:04:05.0")
}

// localVolumes makes a StorageClass with no provisioner and n local volumes of it of access mode
// mode, in one folder of the host that every real node has (they share the host's file system).
// Spark 3.5 asks ReadWriteOnce of the claims it makes, Spark 4 ReadWriteOncePod (unless
// spark.kubernetes.legacy.useReadWriteOnceAccessMode), which binds only a volume of that mode
// alone.
func localVolumes(t *testing.T, n int, mode corev1.PersistentVolumeAccessMode) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("driverset-e2e-claims-%d", time.Now().UnixNano()%100000)
	dir := filepath.Join(os.TempDir(), name)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o777) // the spark user writes there
	t.Cleanup(func() {
		for i := range n {
			_ = kube().CoreV1().PersistentVolumes().Delete(context.Background(), fmt.Sprintf("%s-%d", name, i), metav1.DeleteOptions{})
		}
		_ = kube().StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = os.RemoveAll(dir)
	})
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wait}
	if _, err := kube().StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i)},
			Spec: corev1.PersistentVolumeSpec{
				StorageClassName:       name,
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{mode},
				PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn,
						Values: bed.cluster.RealNodes()}},
				}}}},
			},
		}
		if _, err := kube().CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

// claimRecord is one claim of a namespace as the poll saw it.
type claimRecord struct {
	name, app, owner      string
	driverLabel           string // driverset.dev/driver, which the driver gives the executor claims it makes
	first, deleting, gone time.Time
}

// claimPoll lists a namespace's claims every 500 ms.
type claimPoll struct {
	*lister
	mu    sync.Mutex
	byUID map[string]*claimRecord
}

func pollClaims(t *testing.T, ns string) *claimPoll {
	t.Helper()
	p := &claimPoll{byUID: map[string]*claimRecord{}}
	p.lister = listEvery(t, func(ctx context.Context) {
		if list, err := kube().CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{}); err == nil {
			p.record(list.Items)
		}
	})
	return p
}

func (p *claimPoll) record(items []corev1.PersistentVolumeClaim) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	live := map[string]bool{}
	for i := range items {
		c := &items[i]
		uid := string(c.UID)
		live[uid] = true
		rec := p.byUID[uid]
		if rec == nil {
			rec = &claimRecord{name: c.Name, app: c.Labels[contract.LabelSparkAppSelector], driverLabel: c.Labels[contract.LabelDriver], first: now}
			if ref := metav1.GetControllerOf(c); ref != nil {
				rec.owner = ref.Kind + " " + ref.Name + " " + string(ref.UID)
			}
			p.byUID[uid] = rec
		}
		if c.DeletionTimestamp != nil && rec.deleting.IsZero() {
			rec.deleting = now
		}
	}
	for uid, rec := range p.byUID {
		if !live[uid] && rec.gone.IsZero() {
			rec.gone = now
		}
	}
}

func (p *claimPoll) seen() []claimRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []claimRecord
	for _, r := range p.byUID {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b claimRecord) int { return a.first.Compare(b.first) })
	return out
}
