//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
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
			expectIncarnationAppIDs(t, r.sub.plan.AppID, []*corev1.Pod{r.pod, d1}, []string{r.driver.AppID(), drv.AppID()})
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

// Spark 2.4 starts a PySpark driver with driver-py, its file (local:// stripped) and arguments in
// the env: driverset converts it like any driver, and the JVM in S-0 runs PythonRunner on that
// file, at its own pod's name and the stable host.
func TestSpark24PySparkDriverIsConverted(t *testing.T) {
	a := app("", "pypi")
	a.PyFile = "local:///opt/app/pi.py"
	a.AppArgs = []string{"100"}
	spark24NonJVMDriverIsConverted(t, a, spark24Binding{entry: "driver-py", runner: sparksim.PythonRunner,
		primary: "/opt/app/pi.py", env: []string{"PYSPARK_PRIMARY", "PYSPARK_MAJOR_PYTHON_VERSION", "PYSPARK_APP_ARGS", "PYSPARK_FILES"}})
}

// The same for Spark 2.4's R driver: driver-r, the file in R_PRIMARY and the arguments in
// R_APP_ARGS; the JVM in S-0 runs RRunner on that file with those arguments.
func TestSpark24RDriverIsConverted(t *testing.T) {
	a := app("", "rpi")
	a.RFile = "local:///opt/app/pi.R"
	a.AppArgs = []string{"10", "20"}
	spark24NonJVMDriverIsConverted(t, a, spark24Binding{entry: "driver-r", runner: sparksim.RRunner,
		primary: "/opt/app/pi.R", env: []string{"R_PRIMARY", "R_APP_ARGS"}})
}

// spark24Binding is what Spark 2.4's PySpark or R binding step makes of an app: the entry
// command, the runner class, the file the in-pod spark-submit gets, and the env that carries them.
type spark24Binding struct {
	entry, runner, primary string
	env                    []string
}

// spark24NonJVMDriverIsConverted submits a (a 2.4 PySpark or R app, opted in) and checks that the
// pod is admitted as the placeholder; that S-0 keeps the entry command with driverset's two
// --conf right after it and then Spark's own args, and carries the binding env unchanged; that
// the driver JVM there runs the runner on the file at its own pod and the stable name; and that
// spark-submit sees the application complete.
func spark24NonJVMDriverIsConverted(t *testing.T, a sparksim.App, want spark24Binding) {
	t.Helper()
	ctx := context.Background()
	ns := namespace(t, nil)
	dumpOnFailure(t, ns)
	a.Namespace, a.Version = ns, sparksim.Spark24
	s := submit(t, a)
	sent := s.plan.DriverPod.Spec.Containers[0]
	if sent.Args[0] != want.entry {
		t.Fatalf("Spark 2.4's driver starts with %q, want %s", sent.Args[0], want.entry)
	}
	p := getPod(t, ns, s.plan.DriverPodName)
	if p.Labels[contract.LabelPlaceholder] != "true" || !convert.HasGate(&p.Spec, contract.GatePlaceholder) {
		t.Fatalf("the driver pod was not admitted as a gated placeholder: labels %v, gates %v", p.Labels, p.Spec.SchedulingGates)
	}
	names := contract.NamesFor(s.plan.DriverPodName)
	d0 := runningDriver(t, ns, names, "")
	i := slices.IndexFunc(d0.Spec.Containers, func(c corev1.Container) bool { return c.Name == contract.DriverContainerName })
	if i < 0 {
		t.Fatalf("%s has no %s container", d0.Name, contract.DriverContainerName)
	}
	ran := d0.Spec.Containers[i]
	wantArgs := slices.Concat([]string{want.entry}, convert.DriverConf(names, ns, p.Labels[contract.LabelSparkAppSelector]), sent.Args[1:])
	if !slices.Equal(ran.Args, wantArgs) {
		t.Errorf("%s's driver args %q, want %q", d0.Name, ran.Args, wantArgs)
	}
	for _, name := range want.env {
		sentVar, ranVar := envVar(sent.Env, name), envVar(ran.Env, name)
		if sentVar == nil || ranVar == nil || !equality.Semantic.DeepEqual(sentVar, ranVar) {
			t.Errorf("env %s: Spark sent %+v, %s has %+v; want it sent and carried unchanged", name, sentVar, d0.Name, ranVar)
		}
	}

	drv, err := sparksim.StartDriver(ctx, kube(), ns, d0.Name)
	if err != nil {
		t.Fatalf("the driver did not start in %s: %v", d0.Name, err)
	}
	if drv.MainClass() != want.runner || drv.Primary() != want.primary || !slices.Equal(drv.AppArgs(), a.AppArgs) {
		t.Errorf("the driver runs %s on %s %q, want %s on %s %q", drv.MainClass(), drv.Primary(), drv.AppArgs(), want.runner, want.primary, a.AppArgs)
	}
	if drv.OwnPod().UID != d0.UID {
		t.Errorf("the driver found pod %s, want its own pod %s", drv.OwnPod().Name, d0.Name)
	}
	if got, wantHost := drv.Conf()["spark.driver.host"], names.DriverHost(ns); got != wantHost {
		t.Errorf("spark.driver.host = %q, want the stable name %q", got, wantHost)
	}
	exitDriver(t, d0, 0)
	if res := s.Wait(t, 60*time.Second); res.FinalPhase != corev1.PodSucceeded || res.ExitCode != 0 {
		t.Errorf("spark-submit: final phase %s, exit code %d; want Succeeded, 0", res.FinalPhase, res.ExitCode)
	}
}

// envVar is the variable called name in env, or nil.
func envVar(env []corev1.EnvVar, name string) *corev1.EnvVar {
	for i := range env {
		if env[i].Name == name {
			return &env[i]
		}
	}
	return nil
}

// testLog sends spark-submit's lines to the test log.
type testLog struct{ t *testing.T }

func (w testLog) Write(b []byte) (int, error) {
	w.t.Log("spark-submit: " + strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// spark-submit 3.x/4.x waits forever for a driver pod that went away while its watch was being
// reset (sparksim: TestSubmitWaitsForeverForAPodLostInAWatchReset). driverset never deletes or
// replaces the placeholder: with a watch reset at every turn of a failed driver's restart and
// its completion, spark-submit finds the same pod each time and ends with the real final phase.
func TestWatchResetsNeverLoseTheDriverPod(t *testing.T) {
	for _, v := range []sparksim.Version{sparksim.Spark35, sparksim.Spark41} {
		t.Run("spark-"+string(v), func(t *testing.T) {
			ns := namespace(t, nil)
			dumpOnFailure(t, ns)
			a := app(ns, "resets")
			a.Version = v
			plan, err := a.Plan()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			resets := make(chan struct{})
			done := make(chan struct{})
			var res *sparksim.Result
			go func() {
				defer close(done)
				res, err = sparksim.SubmitPlan(ctx, kube(), plan, sparksim.SubmitOptions{WaitAppCompletion: true, WatchResets: resets, Log: testLog{t}})
			}()
			reset := func(when string) {
				select {
				case resets <- struct{}{}:
					t.Logf("watch reset (HTTP 410) %s", when)
				case <-done:
					t.Fatalf("spark-submit returned before the reset %s: %+v, %v", when, res, err)
				}
			}
			names := contract.NamesFor(plan.DriverPodName)
			d0 := runningDriver(t, ns, names, "")
			p := getPod(t, ns, plan.DriverPodName)
			reset("while the driver runs")
			exitDriver(t, d0, 1)
			reset("right after the driver failed")
			d1 := runningDriver(t, ns, names, string(d0.UID))
			reset("once the new incarnation runs")
			exitDriver(t, d1, 0)
			reset("right after the driver succeeded")
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("spark-submit still waits a minute after the driver succeeded")
			}
			if err != nil || res.ExitCode != 0 || res.FinalPhase != corev1.PodSucceeded || res.Lost || res.Deleted {
				t.Errorf("spark-submit: %v, exit %d, final %s, lost %v, deleted %v; want Succeeded, seen to the end",
					err, res.ExitCode, res.FinalPhase, res.Lost, res.Deleted)
			}
			if now := getPod(t, ns, plan.DriverPodName); now.UID != p.UID {
				t.Errorf("the driver pod spark-submit watches was replaced: uid %s, then %s", p.UID, now.UID)
			}
		})
	}
}

// Spark 4.1 with spark.kubernetes.executor.useDriverPodIP: SparkContext would replace
// spark.driver.host by the bind address (the pod IP), over driverset's --conf, and executors would
// get that IP in their driver URL. An IP is what a new incarnation never keeps, so S-0 turns the
// option off (a later --conf): the driver keeps the stable name and every executor is pointed at
// it, before and after a restart.
func TestUseDriverPodIPExecutorsGetTheStableName(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	dumpOnFailure(t, ns)
	a := app(ns, "podip")
	a.Version = sparksim.Spark41
	a.Conf = map[string]string{"spark.kubernetes.executor.useDriverPodIP": "true"}
	r := startApp(t, a, 2)
	want := fmt.Sprintf("spark://CoarseGrainedScheduler@%s:%d", r.names.DriverHost(ns), sparksim.DriverPort)
	check := func(drv *sparksim.Driver, pod *corev1.Pod, execs []*corev1.Pod) {
		t.Helper()
		if got := drv.Conf()["spark.driver.host"]; got != r.names.DriverHost(ns) {
			t.Errorf("the driver's spark.driver.host = %q (its pod IP is %q), want the stable name %q", got, pod.Status.PodIP, r.names.DriverHost(ns))
		}
		for _, e := range execs {
			if got := envOf(e, contract.EnvDriverURL); got != want {
				t.Errorf("executor %s: %s=%q, want the stable name %q", e.Name, contract.EnvDriverURL, got, want)
			}
		}
	}
	check(r.driver, r.pod, r.executors)
	// 4.1's driver container declares Spark Connect's port (SPARK-52193): the stable name serves it too.
	h, err := kube().CoreV1().Services(ns).Get(ctx, r.names.Service, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(h.Spec.Ports, func(p corev1.ServicePort) bool {
		return p.Name == sparksim.PortNameConnect && p.Port == sparksim.ConnectPort
	}) {
		t.Errorf("headless Service %s ports %+v: no %s:%d", h.Name, h.Spec.Ports, sparksim.PortNameConnect, sparksim.ConnectPort)
	}

	if err := r.driver.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	exitDriver(t, r.pod, 1)
	d1 := runningDriver(t, ns, r.names, string(r.pod.UID))
	drv, err := sparksim.StartDriver(ctx, kube(), ns, d1.Name)
	if err != nil {
		t.Fatal(err)
	}
	execs, err := drv.RequestExecutors(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	check(drv, d1, execs)
}

// A new driver JVM numbers its executors from 1 again, and Spark counts as its own every executor
// pod with the app id (ExecutorPodsAllocator and ExecutorPodsLifecycleManager read snapshots by
// spark-app-selector and spark-role=executor): an executor left by an earlier incarnation would
// inflate the new driver's count, take one of its ids, or count as its failure. So on every
// version the new incarnation is held while one exists (a finalizer keeps one here, as a slow
// kubelet would), and when its JVM starts it sees no executor but its own.
func TestStaleExecutorGateOnEveryVersion(t *testing.T) {
	for _, v := range []sparksim.Version{sparksim.Spark24, sparksim.Spark35, sparksim.Spark41} {
		t.Run("spark-"+string(v), func(t *testing.T) {
			ctx := context.Background()
			ns := namespace(t, nil)
			dumpOnFailure(t, ns)
			a := app(ns, "count")
			a.Version = v
			r := startApp(t, a, 2)
			release := holdPod(t, ns, r.executors[0].Name)
			// The JVM is killed (no clean stop): its executors stay until the garbage collector acts.
			exitDriver(t, r.pod, 137)
			waitFor(t, 30*time.Second, "a new incarnation held by the stale-executor gate", func(ctx context.Context) (bool, error) {
				p, err := kube().CoreV1().Pods(ns).Get(ctx, r.names.DriverPodName(), metav1.GetOptions{})
				return err == nil && p.UID != r.pod.UID && convert.HasGate(&p.Spec, contract.GateStaleExecutors), nil
			})
			time.Sleep(2 * time.Second)
			if p := getPod(t, ns, r.names.DriverPodName()); p.Spec.NodeName != "" {
				t.Fatalf("the new incarnation was scheduled on %s while an executor of the old one exists", p.Spec.NodeName)
			}
			release()
			d1 := runningDriver(t, ns, r.names, string(r.pod.UID))
			drv, err := sparksim.StartDriver(ctx, kube(), ns, d1.Name)
			if err != nil {
				t.Fatal(err)
			}
			if seen, err := drv.Executors(ctx); err != nil || len(seen) != 0 {
				t.Fatalf("the new driver starts counting %d executor(s) of its app (%v), want 0", len(seen), err)
			}
			if _, err := drv.RequestExecutors(ctx, 2); err != nil {
				t.Fatalf("the new driver could not make executors 1 and 2: %v", err)
			}
			seen, err := drv.Executors(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, e := range seen {
				ids = append(ids, e.Labels[sparksim.LabelExecID])
				if !ownedBy(&e, d1) {
					t.Errorf("the new driver counts executor %s, owned by %v, not by its pod", e.Name, e.OwnerReferences)
				}
			}
			slices.Sort(ids)
			if !slices.Equal(ids, []string{"1", "2"}) {
				t.Errorf("the new driver counts executors with ids %v, want exactly its own 1 and 2", ids)
			}
		})
	}
}
