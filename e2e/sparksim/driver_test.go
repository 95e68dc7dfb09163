package sparksim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/driverset/driverset/contract"
)

func TestExpandVars(t *testing.T) {
	vars := map[string]string{"POD": "d-0", "NS": "apps", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	for in, want := range map[string]string{
		"spark.kubernetes.driver.pod.name=$(POD)": "spark.kubernetes.driver.pod.name=d-0",
		"$(POD).svc.$(NS)":                        "d-0.svc.apps",
		"$(UNKNOWN)":                              "$(UNKNOWN)",
		"$$(POD)":                                 "$(POD)",
		"$$$(POD)":                                "$d-0",
		"a$b":                                     "a$b",
		"$(POD":                                   "$(POD",
		"x=$(EMPTY)":                              "x=",
		"trailing$":                               "trailing$",
	} {
		if got := expandVars(in, lookup); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSparkArgs(t *testing.T) {
	for _, tc := range []struct {
		argv  []string
		entry string
		want  []string
	}{
		{[]string{"driver", "--class", "C"}, "driver", []string{"--class", "C"}},
		{[]string{"/opt/entrypoint.sh", "driver", "x"}, "driver", []string{"x"}},
		{[]string{"/opt/driverset/bin/driverset", "wrap", "--", "/opt/entrypoint.sh", "driver", "--conf", "a=b"}, "driver", []string{"--conf", "a=b"}},
		{[]string{"tini", "-s", "--", "driver"}, "driver", []string{}},
		{[]string{"driver-py", "--class", "org.apache.spark.deploy.PythonRunner"}, "driver-py", []string{"--class", "org.apache.spark.deploy.PythonRunner"}},
		{[]string{"wrap", "--", "/opt/entrypoint.sh", "driver-r", "--conf", "a=b"}, "driver-r", []string{"--conf", "a=b"}},
		{[]string{"executor"}, "", nil},
		{[]string{"wrap", "--", "/opt/entrypoint.sh", "executor"}, "", nil},
	} {
		entry, got, err := sparkArgs(tc.argv)
		if tc.want == nil {
			if err == nil {
				t.Errorf("%q accepted: %q", tc.argv, got)
			}
			continue
		}
		if err != nil || entry != tc.entry || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q %q %v, want %q %q", tc.argv, entry, got, err, tc.entry, tc.want)
		}
	}
}

// Spark 2.4's entrypoint appends the PySpark/R primary file and its arguments from the env.
func TestEntryArgs(t *testing.T) {
	env := map[string]string{"PYSPARK_PRIMARY": "local:///app/pi.py", "PYSPARK_APP_ARGS": "10 20", "R_PRIMARY": "local:///app/pi.R"}
	for entry, want := range map[string][]string{
		"driver":    nil,
		"driver-py": {"local:///app/pi.py", "10", "20"},
		"driver-r":  {"local:///app/pi.R"},
	} {
		if got := entryArgs(entry, env); !slices.Equal(got, want) {
			t.Errorf("entryArgs(%s) = %q, want %q", entry, got, want)
		}
	}
}

// submitted runs Submit against a fake without waiting and marks the pod running with an IP.
func submitted(t *testing.T, app App) (*Result, *fake.Clientset) {
	t.Helper()
	c := newFake(t)
	res, err := Submit(context.Background(), c, app, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, _ := c.CoreV1().Pods(app.Namespace).Get(context.Background(), res.Pod.Name, metav1.GetOptions{})
	pod.Status.Phase, pod.Status.PodIP = corev1.PodRunning, "10.0.0.7"
	if _, err := c.CoreV1().Pods(app.Namespace).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return res, c
}

func TestDriverOnTheBarePod(t *testing.T) {
	for _, v := range []Version{Spark24, Spark35, Spark41} {
		t.Run(string(v), func(t *testing.T) {
			app := testApp(v)
			app.ExecutorLabels = map[string]string{"team": "a"}
			res, c := submitted(t, app)
			ctx := context.Background()
			d, err := StartDriverWith(ctx, c, "apps", res.Pod.Name, DriverOptions{Rand: seeded(9), Now: fixedNow})
			if err != nil {
				t.Fatal(err)
			}
			conf := d.Conf()
			if d.AppID() != res.Plan.AppID || d.OwnPod().UID != res.Pod.UID {
				t.Errorf("app id %s own pod uid %s", d.AppID(), d.OwnPod().UID)
			}
			if conf["spark.driver.bindAddress"] != "10.0.0.7" || conf["spark.submit.deployMode"] != "client" ||
				conf["spark.driver.host"] != res.Plan.ServiceName+".apps.svc" {
				t.Errorf("entrypoint settings: bind %q mode %q host %q", conf["spark.driver.bindAddress"], conf["spark.submit.deployMode"], conf["spark.driver.host"])
			}
			pods, err := d.RequestExecutors(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			wantPrefix := d.ExecutorPrefix()
			if v == Spark24 && wantPrefix != res.Plan.Prefix {
				t.Errorf("2.4 executor prefix %q, want spark-submit's %q", wantPrefix, res.Plan.Prefix)
			}
			for i, p := range pods {
				checkExecutor(t, v, p, i+1, wantPrefix, res)
			}
			listed, err := d.Executors(ctx)
			if err != nil || len(listed) != 2 {
				t.Errorf("Executors: %d %v", len(listed), err)
			}
			if (d.ExecutorConfigMap() != "") != (v != Spark24) {
				t.Errorf("executor configmap %q", d.ExecutorConfigMap())
			}
			if err := d.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			left, _ := d.Executors(ctx)
			svcs, _ := c.CoreV1().Services("apps").List(ctx, metav1.ListOptions{})
			if len(left) != 0 {
				t.Errorf("executors left after Stop: %d", len(left))
			}
			// Spark's Service carries the app id from 3.x on, so a clean stop deletes it.
			if want := map[bool]int{true: 1, false: 0}[v == Spark24]; len(svcs.Items) != want {
				t.Errorf("%d services after Stop, want %d", len(svcs.Items), want)
			}
		})
	}
}

func checkExecutor(t *testing.T, v Version, p *corev1.Pod, n int, prefix string, res *Result) {
	t.Helper()
	if want := fmt.Sprintf("%s-exec-%d", prefix, n); p.Name != want {
		t.Errorf("executor name %q, want %q", p.Name, want)
	}
	want := map[string]string{
		contract.LabelSparkAppSelector: res.Plan.AppID, contract.LabelSparkRole: contract.RoleExecutor,
		LabelExecID: fmt.Sprint(n), "team": "a",
	}
	if v != Spark24 {
		want[LabelResourceProfile] = "0"
		want[LabelSparkVersion] = p.Labels[LabelSparkVersion]
		want[LabelSparkAppName] = "spark-pi"
	}
	if !maps.Equal(p.Labels, want) {
		t.Errorf("executor labels %v, want %v", p.Labels, want)
	}
	refs := p.OwnerReferences
	if len(refs) != 1 || refs[0].Kind != "Pod" || refs[0].Name != res.Pod.Name || refs[0].UID != res.Pod.UID || !*refs[0].Controller {
		t.Errorf("executor owner %+v", refs)
	}
	if p.Spec.RestartPolicy != corev1.RestartPolicyNever || !slices.Equal(p.Spec.Containers[0].Args, []string{"executor"}) {
		t.Errorf("restartPolicy %q args %q", p.Spec.RestartPolicy, p.Spec.Containers[0].Args)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range p.Spec.Containers[0].Env {
		env[e.Name] = e
	}
	if got := env[contract.EnvDriverURL].Value; got != "spark://CoarseGrainedScheduler@"+res.Plan.ServiceName+".apps.svc:7078" {
		t.Errorf("driver URL %q", got)
	}
	if env["SPARK_EXECUTOR_ID"].Value != fmt.Sprint(n) || env["SPARK_APPLICATION_ID"].Value != res.Plan.AppID ||
		env["SPARK_EXECUTOR_POD_IP"].ValueFrom == nil || env["SPARK_EXECUTOR_POD_IP"].ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("executor env %v", env)
	}
	if _, ok := env["SPARK_EXECUTOR_POD_NAME"]; ok != (v != Spark24) {
		t.Errorf("SPARK_EXECUTOR_POD_NAME present=%v on %s", ok, v)
	}
	if got := p.Spec.Containers[0].Resources.Limits.Memory().String(); got != "1408Mi" {
		t.Errorf("executor memory %s", got)
	}
}

// statefulPod is how driverset's StatefulSet pod runs the driver: wrapped, with --conf overrides
// that use $(VAR)s, reading Spark's ConfigMap.
func statefulPod(res *Result, name string) *corev1.Pod {
	pod := res.Plan.DriverPod.DeepCopy()
	pod.Name, pod.UID = name, types.UID("uid-"+name)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.9"}
	ctr := &pod.Spec.Containers[0]
	ctr.Env = append(ctr.Env, corev1.EnvVar{Name: contract.EnvPodName, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
	ctr.Command = []string{"/opt/driverset/bin/driverset", "wrap", "--", "/opt/entrypoint.sh"}
	ctr.Args = append([]string{"driver",
		"--conf", "spark.kubernetes.driver.pod.name=$(" + contract.EnvPodName + ")",
		"--conf", "spark.driver.host=$(" + contract.EnvPodName + ").h.apps.svc",
		"--conf", "spark.app.name=renamed",
		"--conf", "spark.literal=$(NOT_DEFINED)",
	}, ctr.Args[1:]...)
	return pod
}

func TestDriverConfPrecedenceAndExpansion(t *testing.T) {
	res, c := submitted(t, testApp(Spark35))
	ctx := context.Background()
	if _, err := c.CoreV1().Pods("apps").Create(ctx, statefulPod(res, "s-0"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d, err := StartDriver(ctx, c, "apps", "s-0")
	if err != nil {
		t.Fatal(err)
	}
	conf := d.Conf()
	for k, want := range map[string]string{
		"spark.kubernetes.driver.pod.name": "s-0",              // --conf beats the file
		"spark.driver.host":                "s-0.h.apps.svc",   // likewise, $(VAR) from metadata.name
		"spark.app.name":                   "renamed",          // likewise
		"spark.literal":                    "$(NOT_DEFINED)",   // unknown refs stay literal
		"spark.app.id":                     res.Plan.AppID,     // from the file: same app id
		"spark.driver.bindAddress":         "10.0.0.9",         // the entrypoint's, from status.podIP
		"spark.kubernetes.namespace":       "apps",             // from the file
		"spark.driver.port":                "7078",             // from the file
		"spark.jars":                       DefaultResource,    // from the file
		"spark.kubernetes.container.image": "apache/spark:3.5", // from the file
	} {
		if conf[k] != want {
			t.Errorf("%s = %q, want %q", k, conf[k], want)
		}
	}
	if d.OwnPod().Name != "s-0" || d.OwnPod().UID != "uid-s-0" {
		t.Errorf("own pod %s/%s", d.OwnPod().Name, d.OwnPod().UID)
	}
	pods, err := d.RequestExecutors(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ref := pods[0].OwnerReferences[0]; ref.Name != "s-0" || ref.UID != "uid-s-0" {
		t.Errorf("executor owned by %s/%s, want the running pod s-0", ref.Name, ref.UID)
	}
	for _, e := range pods[0].Spec.Containers[0].Env {
		if e.Name == contract.EnvDriverURL && e.Value != "spark://CoarseGrainedScheduler@s-0.h.apps.svc:7078" {
			t.Errorf("driver URL %q", e.Value)
		}
	}
	// A second JVM of the same pod: same app id, a fresh executor prefix, counting from 1 again.
	d2, err := StartDriverWith(ctx, c, "apps", "s-0", DriverOptions{Rand: seeded(42), Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	pods2, err := d2.RequestExecutors(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d2.AppID() != d.AppID() || d2.ExecutorPrefix() == d.ExecutorPrefix() || !strings.HasSuffix(pods2[0].Name, "-exec-1") {
		t.Errorf("restarted JVM: app id %s vs %s, prefix %s vs %s, executor %s", d2.AppID(), d.AppID(), d2.ExecutorPrefix(), d.ExecutorPrefix(), pods2[0].Name)
	}
	if all, _ := d2.Executors(ctx); len(all) != 2 {
		t.Errorf("the restarted driver sees %d executors of its app id, want both (2)", len(all))
	}
}

func TestDriverWithoutItsOwnPod(t *testing.T) {
	res, c := submitted(t, testApp(Spark41))
	ctx := context.Background()
	pod := statefulPod(res, "s-0")
	pod.Spec.Containers[0].Env = pod.Spec.Containers[0].Env[:len(pod.Spec.Containers[0].Env)-1] // no DRIVERSET_POD_NAME
	if _, err := c.CoreV1().Pods("apps").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := StartDriver(ctx, c, "apps", "s-0")
	want := "No pod was found named $(DRIVERSET_POD_NAME) in the cluster in the namespace apps (this was supposed to be the driver pod.)."
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

func TestDriverNeedsItsConfigMap(t *testing.T) {
	app := testApp(Spark35)
	plan, err := app.Plan()
	if err != nil {
		t.Fatal(err)
	}
	c := newFake(t, plan.DriverPod) // the pod alone: its ConfigMap was never created
	if _, err := StartDriver(context.Background(), c, "apps", plan.DriverPodName); err == nil || !strings.Contains(err.Error(), plan.ConfigMapName) {
		t.Errorf("error %v, want one naming %s", err, plan.ConfigMapName)
	}
}

func TestUseDriverPodIP(t *testing.T) {
	app := testApp(Spark41)
	app.Conf = map[string]string{"spark.kubernetes.executor.useDriverPodIP": "true"}
	res, c := submitted(t, app)
	d, err := StartDriver(context.Background(), c, "apps", res.Pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.driverURL(); got != "spark://CoarseGrainedScheduler@10.0.0.7:7078" {
		t.Errorf("driver URL %q", got)
	}
	if got := d.Conf()["spark.driver.host"]; got != "10.0.0.7" {
		t.Errorf("spark.driver.host = %q, want the bind address (SparkContext sets it so)", got)
	}
}

// TestDriverCalls: the driver JVM's calls from its start to its clean stop, in order, as the
// apiserver's audit log shows them for Spark 3.5.6 and 4.1.1 (e2e/realnode/spark_calls_test.go
// checks the same against the real thing). The first two reads are the simulator's own: it
// reads its pod's spec and the properties file through the API (see StartDriverWith). The fake
// has no REST client, so the Services' delete-collection is a list and a delete here.
func TestDriverCalls(t *testing.T) {
	for _, tc := range []struct {
		v     Version
		calls []string
	}{
		{Spark35, []string{
			"get pods", "get configmaps", // the simulator's own reads
			"get pods", "list pods", "watch pods", // its own pod; Ready?; then Ready by watch
			"watch pods", "list persistentvolumeclaims", "create configmaps", "create pods", "create pods",
			"list services", "delete services", "delete-collection persistentvolumeclaims", "delete-collection pods", "delete-collection configmaps",
		}},
		{Spark41, []string{
			"get pods", "get configmaps",
			"get pods", "list pods", "watch pods",
			"watch pods", "list persistentvolumeclaims", "create configmaps", "create pods", "create pods",
			"list services", "delete services", "delete-collection persistentvolumeclaims", "delete-collection pods", "delete-collection configmaps",
		}},
	} {
		t.Run(string(tc.v), func(t *testing.T) {
			res, c := submitted(t, testApp(tc.v))
			ctx := context.Background()
			c.ClearActions()
			d, err := StartDriverWith(ctx, c, "apps", res.Pod.Name, DriverOptions{Rand: seeded(9), Now: fixedNow})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.RequestExecutors(ctx, 2); err != nil {
				t.Fatal(err)
			}
			if err := d.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if got := verbs(c); !slices.Equal(got, tc.calls) {
				t.Errorf("calls\n%q\nwant\n%q", got, tc.calls)
			}
		})
	}
}

// TestExecutorStartupConf: the settings an executor gets as -D options, read from each
// version's SparkConf.isExecutorStartupConf (javap of spark-core 3.5.6 and 4.1.1): 4.x adds
// spark.ssl.* but passwords.
func TestExecutorStartupConf(t *testing.T) {
	conf := map[string]string{
		"spark.authenticate": "true", "spark.authenticate.secret": "s", "spark.rpc.askTimeout": "30s",
		"spark.network.timeout": "60s", "spark.ssl.enabled": "true", "spark.ssl.keyStorePassword": "p",
		"spark.port.maxRetries": "4", "spark.blockManager.port": "7079", "spark.app.name": "pi",
	}
	for _, tc := range []struct {
		v    Version
		want []string
	}{
		{Spark35, []string{"-Dspark.authenticate=true", "-Dspark.blockManager.port=7079", "-Dspark.network.timeout=60s",
			"-Dspark.port.maxRetries=4", "-Dspark.rpc.askTimeout=30s"}},
		{Spark41, []string{"-Dspark.authenticate=true", "-Dspark.blockManager.port=7079", "-Dspark.network.timeout=60s",
			"-Dspark.port.maxRetries=4", "-Dspark.rpc.askTimeout=30s", "-Dspark.ssl.enabled=true"}},
	} {
		t.Run(string(tc.v), func(t *testing.T) {
			tr, err := tc.v.traits()
			if err != nil {
				t.Fatal(err)
			}
			d := &Driver{t: tr, conf: conf}
			if got := d.javaOpts(); !slices.Equal(got, tc.want) {
				t.Errorf("executor -D options\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// TestDriverPollsItsExecutors: besides its watch, the driver lists its active executors every
// poll interval until its clean stop (ExecutorPodsPollingSnapshotSource), on every version.
func TestDriverPollsItsExecutors(t *testing.T) {
	for _, v := range []Version{Spark35, Spark41} {
		t.Run(string(v), func(t *testing.T) {
			res, c := submitted(t, testApp(v))
			ctx := context.Background()
			d, err := StartDriverWith(ctx, c, "apps", res.Pod.Name, DriverOptions{PollInterval: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			polls := func() int {
				n := 0
				for _, a := range c.Actions() {
					if l, ok := a.(k8stesting.ListAction); ok && a.GetResource().Resource == "pods" &&
						l.GetListRestrictions().Labels.String() == d.activeSelector() {
						n++
					}
				}
				return n
			}
			time.Sleep(200 * time.Millisecond)
			if polls() < 2 {
				t.Errorf("%d polls in 200 ms at a 20 ms interval", polls())
			}
			if !strings.Contains(d.activeSelector(), LabelExecInactive+"!=true") {
				t.Errorf("the poll's selector %q does not leave out inactive executors", d.activeSelector())
			}
			if err := d.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
			after := polls()
			time.Sleep(100 * time.Millisecond)
			if polls() != after {
				t.Errorf("the driver still polls after its clean stop")
			}
		})
	}
}

// Under driverset wrap with --spark-app-id, the driver runs with its incarnation's own app id, as
// wrap makes it (wrap.DriverCommand, the real code): two pods of one template, two ids.
func TestDriverUnderWrapRunsWithItsIncarnationsAppID(t *testing.T) {
	res, c := submitted(t, testApp(Spark35))
	ctx := context.Background()
	for _, uid := range []string{"3f2a9c1e-0b1c-4d2e-9f30-112233445566", "9d8c7b6a-0b1c-4d2e-9f30-112233445566"} {
		name := "s-" + uid[:1]
		pod := statefulPod(res, name)
		pod.UID = types.UID(uid)
		ctr := &pod.Spec.Containers[0]
		ctr.Env = append(ctr.Env, corev1.EnvVar{Name: contract.EnvPodUID, ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}})
		ctr.Command = []string{"/opt/driverset/bin/driverset", "wrap", "--spark-app-id", res.Plan.AppID,
			"--incarnation", "$(" + contract.EnvPodUID + ")", "--", "/opt/entrypoint.sh"}
		ctr.Args = slices.Insert(ctr.Args, 1, "--conf", "spark.app.id="+res.Plan.AppID)
		ctr.Args = slices.Insert(ctr.Args, 1, "--conf", "spark.kubernetes.driver.pod.name="+name)
		if _, err := c.CoreV1().Pods("apps").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		d, err := StartDriver(ctx, c, "apps", name)
		if err != nil {
			t.Fatal(err)
		}
		if want := res.Plan.AppID + "-" + uid[:8]; d.AppID() != want {
			t.Errorf("the driver in pod %s runs as app %s, want %s", uid, d.AppID(), want)
		}
	}
}
