//go:build testbed

package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/sparksim"
)

// staticVolume makes a StorageClass without a provisioner and one PersistentVolume of it, so that
// a claim Spark creates for the driver is bound on KWOK nodes (no storage exists there); both are
// removed when the test ends.
func staticVolume(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	if _, err := kube().StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              name,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name}},
		},
	}
	if _, err := kube().CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube().CoreV1().PersistentVolumes().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = kube().StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// Spark 3.2+'s clean stop deletes every claim labelled with the app id, the driver's own OnDemand
// claim included. A driver that fails with an exception stops cleanly, then driverset starts a new
// incarnation that mounts the same claim: it must still be there, bound, and the new driver run.
func TestDriverOnDemandClaimSurvivesRestart(t *testing.T) {
	for _, v := range []sparksim.Version{sparksim.Spark35, sparksim.Spark41} {
		t.Run("spark-"+string(v), func(t *testing.T) {
			ctx := context.Background()
			ns := namespace(t, nil)
			staticVolume(t, ns)
			dumpOnFailure(t, ns)
			a := app(ns, "claim")
			a.Version = v
			vol := "spark.kubernetes.driver.volumes.persistentVolumeClaim.data."
			a.Conf = map[string]string{
				vol + "options.claimName":    sparksim.OnDemand,
				vol + "options.storageClass": ns,
				vol + "options.sizeLimit":    "1Gi",
				vol + "mount.path":           "/data",
			}
			r := startApp(t, a, 1)
			if len(r.sub.plan.Claims) != 1 {
				t.Fatalf("spark-submit planned claims %v, want the driver's one", r.sub.plan.Claims)
			}
			claim := r.sub.plan.Claims[0].Name
			waitFor(t, 30*time.Second, "the driver's claim "+claim+" Bound", func(ctx context.Context) (bool, error) {
				c, err := kube().CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
				return err == nil && c.Status.Phase == corev1.ClaimBound, nil
			})

			// The main class throws: the JVM's shutdown hook stops the SparkContext, then exits 1.
			if err := r.driver.Stop(ctx); err != nil {
				t.Fatalf("the driver's clean stop: %v", err)
			}
			exitDriver(t, r.pod, 1)
			d1 := runningDriver(t, ns, r.names, string(r.pod.UID))
			c, err := kube().CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				t.Fatalf("the driver's claim %s is gone", claim)
			case err != nil:
				t.Fatal(err)
			case c.DeletionTimestamp != nil || c.Status.Phase != corev1.ClaimBound:
				t.Fatalf("the driver's claim %s: deleted at %v, phase %s; want it kept and Bound", claim, c.DeletionTimestamp, c.Status.Phase)
			}
			if _, ok := c.Labels[contract.LabelSparkAppSelector]; ok {
				t.Errorf("the driver's claim still carries %s: Spark's next clean stop deletes it", contract.LabelSparkAppSelector)
			}

			drv, err := sparksim.StartDriver(ctx, kube(), ns, d1.Name)
			if err != nil {
				t.Fatalf("the new incarnation's driver did not start: %v", err)
			}
			if drv.AppID() != r.driver.AppID() {
				t.Errorf("app id %s after the restart, want %s", drv.AppID(), r.driver.AppID())
			}
			if err := drv.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			exitDriver(t, d1, 0)
			if res := r.sub.Wait(t, 60*time.Second); res.FinalPhase != corev1.PodSucceeded {
				t.Errorf("spark-submit's final phase %s, want Succeeded", res.FinalPhase)
			}
		})
	}
}

// dumpOnFailure logs, when the test has failed, the pods, claims and Events of ns: what a reader
// of a red run needs to see why a driver did not run.
func dumpOnFailure(t *testing.T, ns string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx := context.Background()
		if pods, err := kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, p := range pods.Items {
				t.Logf("pod %s: node %q, phase %s, gates %v, deleting %v, conditions %+v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Spec.SchedulingGates, p.DeletionTimestamp != nil, p.Status.Conditions)
			}
		}
		if pvcs, err := kube().CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, c := range pvcs.Items {
				t.Logf("claim %s: phase %s, volume %q, labels %v, deleting %v", c.Name, c.Status.Phase, c.Spec.VolumeName, c.Labels, c.DeletionTimestamp != nil)
			}
		}
		if evs, err := kube().CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, e := range evs.Items {
				t.Logf("event %s %s/%s: %s %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	})
}

// Spark 2.4 starts a PySpark driver with driver-py (and an R driver with driver-r), its file in the
// env: driverset converts it like any driver, and the JVM in S-0 runs PythonRunner on that file,
// at its own pod's name and the stable host.
func TestSpark24PySparkDriverIsConverted(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	dumpOnFailure(t, ns)
	a := app(ns, "pypi")
	a.Version = sparksim.Spark24
	a.PyFile = "local:///opt/app/pi.py"
	a.AppArgs = []string{"100"}
	s := submit(t, a)
	if got := s.plan.DriverPod.Spec.Containers[0].Args[0]; got != "driver-py" {
		t.Fatalf("Spark 2.4's PySpark driver starts with %q, want driver-py", got)
	}
	names := contract.NamesFor(s.plan.DriverPodName)
	d0 := runningDriver(t, ns, names, "")
	if got := d0.Spec.Containers[0].Args[0]; got != "driver-py" {
		t.Errorf("the StatefulSet's driver starts with %q, want driver-py kept", got)
	}
	drv, err := sparksim.StartDriver(ctx, kube(), ns, d0.Name)
	if err != nil {
		t.Fatalf("the driver did not start in %s: %v", d0.Name, err)
	}
	if drv.MainClass() != sparksim.PythonRunner || drv.Primary() != a.PyFile {
		t.Errorf("the driver runs %s on %s, want %s on %s", drv.MainClass(), drv.Primary(), sparksim.PythonRunner, a.PyFile)
	}
	if drv.OwnPod().UID != d0.UID {
		t.Errorf("the driver found pod %s, want its own pod %s", drv.OwnPod().Name, d0.Name)
	}
	if got, want := drv.Conf()["spark.driver.host"], names.DriverHost(ns); got != want {
		t.Errorf("spark.driver.host = %q, want the stable name %q", got, want)
	}
	exitDriver(t, d0, 0)
	if res := s.Wait(t, 60*time.Second); res.FinalPhase != corev1.PodSucceeded || res.ExitCode != 0 {
		t.Errorf("spark-submit: final phase %s, exit code %d; want Succeeded, 0", res.FinalPhase, res.ExitCode)
	}
}
