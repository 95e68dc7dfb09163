//go:build testbed

package realnode

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
	"github.com/driverset/driverset/e2e/harness"
	"github.com/driverset/driverset/e2e/sparksim"
	"github.com/driverset/driverset/e2e/testbed"
	"github.com/driverset/driverset/wrap"
)

func kube() kubernetes.Interface { return bed.cluster.Client }

// Settings of the simulated driver (e2e/cmd/simspark), as Spark conf.
const (
	confControl   = "spark.driverset.sim.controlConfigMap"
	confRunFor    = "spark.driverset.sim.runSeconds"
	confOrphan    = "spark.driverset.sim.spawnOrphan"
	controlKeyEnd = "exit"
)

// namespace makes a namespace for one scenario whose default ServiceAccount may do what Spark's
// driver does (the usual `edit` binding), and checks the at-most-one invariant when it ends.
func namespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-", ".", "-").Replace(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	name = strings.TrimRight(name, "-") + fmt.Sprintf("-%d", time.Now().UnixNano()%100000)
	ctx := context.Background()
	if _, err := kube().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "spark-driver", Namespace: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: name}},
	}
	if _, err := kube().RbacV1().RoleBindings(name).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the namespace's default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := kube().CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	t.Cleanup(func() {
		for _, v := range bed.monitor.Violations(name) {
			t.Errorf("at-most-one driver violated: %s", v)
		}
		if err := bed.monitor.Check(context.Background(), name); err != nil {
			t.Errorf("the at-most-one monitor: %v", err)
		}
		if t.Failed() {
			report(t, name)
		}
		_ = kube().CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// report logs, for a failed scenario, its pods, their drivers' logs and its Events.
func report(t *testing.T, ns string) {
	ctx := context.Background()
	t.Logf("pods of %s:\n%s", ns, testbed.PodsReport(ctx, bed.cluster.Client, ns))
	t.Logf("pods of %s:\n%s", driversetNamespace, testbed.PodsReport(ctx, bed.cluster.Client, driversetNamespace))
	if pods, err := kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				continue
			}
			for _, previous := range []bool{true, false} {
				r, err := kube().CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: contract.DriverContainerName, Previous: previous}).DoRaw(ctx)
				if err == nil {
					t.Logf("log of %s (previous=%v):\n%s", p.Name, previous, r)
				}
			}
		}
	}
	if evs, err := kube().CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range evs.Items {
			t.Logf("event %s %s/%s %s: %s", e.LastTimestamp.Format(time.TimeOnly), e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}

// waitFor polls cond every 500 ms until it holds, failing the test after timeout, or at once
// when a test-bed component is down for good (testbed's CheckAlive).
func waitFor(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	start := time.Now()
	if err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true, bed.cluster.Alive(cond)); err != nil {
		t.Fatalf("waiting %s for %s: %v", timeout, what, err)
	}
	t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
}

// simApp is an opted-in Spark 3.5 app whose image is the simulated Spark image, sized to fit
// small real nodes, ended by the test through its control ConfigMap.
func simApp(ns, name string, executors int) sparksim.App {
	return sparksim.App{
		Version:           sparksim.Spark35,
		Name:              name,
		Namespace:         ns,
		Image:             bed.images.simspark,
		DriverLabels:      map[string]string{contract.LabelResilient: "true"},
		DriverMemoryMiB:   128,
		ExecutorMemoryMiB: 128,
		ExecutorInstances: executors,
		Conf: map[string]string{
			"spark.kubernetes.driver.request.cores":   "100m",
			"spark.kubernetes.executor.request.cores": "100m",
			confControl: name + "-control",
			confRunFor:  "3600",
			// Spelled out: sparksim reads a zero ExecutorInstances as Spark's default of 2.
			"spark.executor.instances": strconv.Itoa(executors),
		},
	}
}

// submission is a spark-submit (simulated, from the host) running in the background, with the
// app it submitted and the names driverset gives its objects.
type submission struct {
	*harness.Submission
	app   sparksim.App
	plan  *sparksim.Plan
	names contract.Names
}

// submit creates the app's control ConfigMap, then runs spark-submit for it in the background
// and waits until its driver pod exists. edit, when set, changes the driver pod before it is sent
// (what a pod template would do).
func submit(t *testing.T, a sparksim.App, edit func(*corev1.Pod)) *submission {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: a.Conf[confControl], Namespace: a.Namespace}}
	if _, err := kube().CoreV1().ConfigMaps(a.Namespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	plan, err := a.Plan()
	if err != nil {
		t.Fatal(err)
	}
	return &submission{Submission: harness.Submit(t, kube(), bed.cluster.CheckAlive, plan, edit), app: a, plan: plan, names: contract.NamesFor(plan.DriverPodName)}
}

// end tells the running driver to exit with code (through the control ConfigMap); "" clears it.
func (s *submission) end(t *testing.T, code string) {
	t.Helper()
	ctx := context.Background()
	cm, err := kube().CoreV1().ConfigMaps(s.app.Namespace).Get(ctx, s.app.Conf[confControl], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if code == "" {
		delete(cm.Data, controlKeyEnd)
	} else {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[controlKeyEnd] = code
	}
	if _, err := kube().CoreV1().ConfigMaps(s.app.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runningDriver waits until S-0 runs on a node, is not the incarnation notUID, and returns it.
func runningDriver(t *testing.T, s *submission, notUID string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, timeout, "driver pod "+s.names.DriverPodName()+" Running", func(ctx context.Context) (bool, error) {
		p, err := kube().CoreV1().Pods(s.app.Namespace).Get(ctx, s.names.DriverPodName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		pod = p
		return string(p.UID) != notUID && p.DeletionTimestamp == nil && p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning && ready(p), nil
	})
	return pod
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	return len(p.Status.ContainerStatuses) > 0
}

// logs is the driver container's log of pod, read through the apiserver and the kubelet.
func logs(ctx context.Context, ns, pod string) (string, error) {
	r, err := kube().CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: contract.DriverContainerName}).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	return string(b), err
}

// waitLog waits until the driver's log in pod holds n lines containing substr, and returns them.
func waitLog(t *testing.T, ns, pod, substr string, n int, timeout time.Duration) []string {
	t.Helper()
	var lines []string
	waitFor(t, timeout, fmt.Sprintf("%d log line(s) %q in %s", n, substr, pod), func(ctx context.Context) (bool, error) {
		l, err := logs(ctx, ns, pod)
		if err != nil {
			return false, nil //nolint:nilerr // the container may not have started yet
		}
		lines = nil
		for _, line := range strings.Split(l, "\n") {
			if strings.Contains(line, substr) {
				lines = append(lines, line)
			}
		}
		return len(lines) >= n, nil
	})
	return lines
}

// processes lists the processes of node whose argv starts with args, args[0] matching the end
// of argv[0] (a path); no args lists them all.
func processes(t *testing.T, node string, args ...string) []testbed.Proc {
	t.Helper()
	all, err := bed.cluster.NodeProcesses(node)
	if err != nil {
		t.Fatal(err)
	}
	var out []testbed.Proc
	for _, p := range all {
		if argvStartsWith(p.Cmdline, args) {
			out = append(out, p)
		}
	}
	return out
}

func argvStartsWith(argv, args []string) bool {
	if len(argv) < len(args) {
		return false
	}
	for i, a := range args {
		if i == 0 && !strings.HasSuffix(argv[0], a) || i > 0 && argv[i] != a {
			return false
		}
	}
	return true
}

// The processes a scenario looks for. The simulated Spark image's entrypoint is one binary that
// re-runs itself for the orphan it leaves behind.
var ( //nolint:gochecknoglobals // constant argv prefixes
	argvWrap   = []string{convert.BinaryPath, "wrap"}
	argvDriver = []string{contract.DefaultEntrypoint, contract.RoleDriver}
	argvOrphan = []string{contract.DefaultEntrypoint, "orphan"}
)

// restricted makes the driver pod meet Pod Security "restricted", as a pod template would.
func restricted(p *corev1.Pod) {
	yes, no := true, false
	uid := int64(185)
	p.Spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   &yes,
		RunAsUser:      &uid,
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	for i := range p.Spec.Containers {
		p.Spec.Containers[i].SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
	}
}

// incarnationAppID is the app id the driver in pod runs with, for the app submitted as appID: its
// own, as wrap gives it (wrap.IncarnationAppID).
func incarnationAppID(t *testing.T, appID string, pod *corev1.Pod) string {
	t.Helper()
	id, err := wrap.IncarnationAppID(appID, string(pod.UID))
	if err != nil {
		t.Fatal(err)
	}
	return id
}
