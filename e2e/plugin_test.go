//go:build testbed

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/inspect"
	"github.com/driverset/driverset/inspect/cli"
)

// plugin runs `kubectl driverset args...` in-process (the binary's whole entry point, flags and
// kubeconfig included) against the test bed, and returns what it printed; it fails the test on
// a non-zero exit.
func plugin(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append(args, "--kubeconfig", bed.cluster.KubeconfigPath)
	if code := cli.Main(context.Background(), args, &out, &errOut); code != 0 {
		t.Fatalf("kubectl driverset %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
	}
	t.Logf("kubectl driverset %s:\n%s", strings.Join(args[:len(args)-2], " "), out.String())
	return out.String()
}

// pluginAs runs `kubectl driverset args...` in-process as user (impersonated with the test bed's
// admin kubeconfig: what the user's own kubeconfig would be allowed) and returns its exit code,
// stdout and stderr.
func pluginAs(t *testing.T, user string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	full := append(append([]string{}, args...), "--kubeconfig", bed.cluster.KubeconfigPath, "--as", user, "--as-group", "system:authenticated")
	code := cli.Main(context.Background(), full, &out, &errOut)
	t.Logf("kubectl driverset %s --as %s: exit %d\n%s%s", strings.Join(args, " "), user, code, out.String(), errOut.String())
	return code, out.String(), errOut.String()
}

// expectLines fails unless out has a line matching each pattern.
func expectLines(t *testing.T, what, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(`(?m)` + p).MatchString(out) {
			t.Errorf("%s: no line matches %q", what, p)
		}
	}
}

// `kubectl driverset status` and `why` for a running app: the real pod, its node, no restart,
// no recovery, no loss; the conversion and the driver's start in the timeline.
func TestPluginRunningApp(t *testing.T) {
	ns := namespace(t, nil)
	r := startApp(t, app(ns, "plugin"), 1)
	p := r.sub.plan.DriverPodName
	expectEvents(t, getPod(t, ns, p), "Converted", "DriverRunning")
	status := plugin(t, "status", p, "-n", ns)
	expectLines(t, "status", status,
		`^Driver: +`+ns+`/`+p+` `,
		`^Outcome: +Running$`,
		`^StatefulSet: +`+r.names.StatefulSet+`, headless Service `+r.names.Service+`$`,
		`^Driver pod: +`+r.names.DriverPodName()+` \(uid `+string(r.pod.UID)+`\), Running, `,
		`^Node: +`+r.pod.Spec.NodeName+`: Ready$`,
		`^Restarts: +0 of 3 `,
		`^Recoveries: +0 `,
		`^Lost driver: +\(none\)$`,
	)
	why := plugin(t, "why", p, "-n", ns)
	expectLines(t, "why", why,
		`placeholder +Normal +\*Converted `,
		`statefulset/`+r.names.StatefulSet+` +Normal +SuccessfulCreate `,
		`pod/`+r.names.DriverPodName()+` \[`+short(r.pod.UID)+`\] +Normal +Scheduled `,
		`placeholder +Normal +\*DriverRunning `,
	)
	inOrder(t, why, "*Converted", "*DriverRunning")
	if n := strings.Count(why, "*Converted"); n != 1 {
		t.Errorf("why shows %d Converted Events, want 1 (each Event once)", n)
	}
}

// A recovered app (its node deleted): status shows the new incarnation on its new node and one
// recovery; why shows both incarnations and the loss before the recovery.
func TestPluginRecoveredApp(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	r := startApp(t, app(ns, "plugin-rec"), 1)
	p := r.sub.plan.DriverPodName
	replaceNode(t, r.pod.Spec.NodeName)
	if err := bed.cluster.DeleteNode(ctx, r.pod.Spec.NodeName); err != nil {
		t.Fatal(err)
	}
	d1 := runningDriverWithin(t, 2*time.Minute, ns, r.names, string(r.pod.UID))
	expectEvents(t, getPod(t, ns, p), "NodeLost", "Recovered")
	status := plugin(t, "status", p, "-n", ns)
	expectLines(t, "status", status,
		`^Driver pod: +`+r.names.DriverPodName()+` \(uid `+string(d1.UID)+`\), Running, `,
		`^Node: +`+d1.Spec.NodeName+`: Ready$`,
		`^Restarts: +0 of 3 `,
		`^Recoveries: +1 `,
		`^Lost driver: +\(none\)$`,
	)
	why := plugin(t, "why", p, "-n", ns)
	expectLines(t, "why", why,
		`pod/`+r.names.DriverPodName()+` \[`+short(r.pod.UID)+`\] `,
		`pod/`+r.names.DriverPodName()+` \[`+short(d1.UID)+`\] `,
		`placeholder +Warning +\*NodeLost +.*`+r.pod.Spec.NodeName,
	)
	inOrder(t, why, "*Converted", "*NodeLost", "*Recovered")
}

// An app waiting on a dead node (no fencing): status shows the driver pod Terminating on a node
// that is not Ready and tainted unreachable, the open loss record, and what an admin can do.
func TestPluginAppWaitingOnADeadNode(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	r := startApp(t, app(ns, "plugin-dead"), 1)
	p := r.sub.plan.DriverPodName
	node := r.pod.Spec.NodeName
	replaceNode(t, node)
	if err := bed.cluster.KillNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bed.cluster.ReviveNode(context.Background(), node) })
	waitFor(t, 2*time.Minute, "the driver pod evicted (Terminating) and the loss recorded", func(ctx context.Context) (bool, error) {
		d, err := kube().CoreV1().Pods(ns).Get(ctx, r.names.DriverPodName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ph, err := kube().CoreV1().Pods(ns).Get(ctx, p, metav1.GetOptions{})
		return err == nil && d.UID == r.pod.UID && d.DeletionTimestamp != nil && strings.Contains(ph.Status.Message, "kubectl delete node"), nil
	})
	status := plugin(t, "status", p, "-n", ns)
	expectLines(t, "status", status,
		`^Message: +.*`+regexp.QuoteMeta("node "+node+" has not been Ready since")+`.*kubectl delete node `+node,
		`^Driver pod: +`+r.names.DriverPodName()+` \(uid `+string(r.pod.UID)+`\), .*Terminating since `,
		`^Node: +`+node+`: not Ready \(Unknown\) since .*tainted node.kubernetes.io/unreachable:NoExecute`,
		`^Recoveries: +0 `,
		`^Lost driver: +driver pod uid `+string(r.pod.UID)+` lost since .* \(recovery path: node-unreachable\)$`,
	)
	why := plugin(t, "why", p, "-n", ns)
	expectLines(t, "why", why, `placeholder +Warning +\*NodeLost `, `placeholder +Record +\*DriverLost `)
}

// `kubectl driverset check`, the check `helm test` runs in its pod: the apiserver admits an
// opted-in driver pod (dry run) with driverset's gate; in an excluded namespace it fails.
func TestPluginCheck(t *testing.T) {
	ns := namespace(t, nil)
	out := plugin(t, "check", "-n", ns)
	if !strings.Contains(out, "driverset.dev/placeholder") {
		t.Errorf("check printed %q", out)
	}
	var stdout, stderr bytes.Buffer
	code := cli.Main(context.Background(), []string{"check", "-n", "kube-system", "--kubeconfig", bed.cluster.KubeconfigPath}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "did not convert") {
		t.Errorf("check in kube-system (excluded): exit %d, %q; want 1 and the reason", code, stderr.String())
	}
	if list, err := kube().CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Errorf("the dry run left pods behind: %v, %v", list, err)
	}
}

// The README's user: a tenant with the namespace's edit role only (no cluster-wide read of Nodes,
// no pods outside the namespace). list, status (table and -o json), why and logs work for them;
// the driver's Node, which they may not read, is shown as not visible instead of failing.
func TestPluginAsATenant(t *testing.T) {
	ns := namespace(t, nil)
	tenant(t, ns)
	user := "tenant-of-" + ns
	r := startApp(t, app(ns, "plugin-tenant"), 1)
	p, node := r.sub.plan.DriverPodName, r.pod.Spec.NodeName

	code, out, errOut := pluginAs(t, user, "list", "-n", ns)
	if code != 0 {
		t.Fatalf("list as a tenant: exit %d: %s", code, errOut)
	}
	expectLines(t, "list", out,
		`^NAME +PHASE +RESTARTS +DRIVER POD +NODE +AGE$`,
		`^`+p+` +Running +0 \(0 in all\) +`+r.names.DriverPodName()+` +`+node+` +\d+s$`,
	)
	if n := strings.Count(out, "\n"); n != 2 {
		t.Errorf("list as a tenant printed %d lines, want the header and one driver", n)
	}
	// -A needs pods of every namespace, which a tenant may not list: the apiserver's refusal.
	if code, _, errOut := pluginAs(t, user, "list", "-A"); code != 1 || !strings.Contains(errOut, "forbidden") {
		t.Errorf("list -A as a tenant: exit %d, %q; want 1 and the apiserver's refusal", code, errOut)
	}
	expectLines(t, "list -A as admin", plugin(t, "list", "-A"), `^`+ns+` +`+p+` +Running +`)

	code, out, errOut = pluginAs(t, user, "status", p, "-n", ns, "-o", "json")
	if code != 0 {
		t.Fatalf("status -o json as a tenant: exit %d: %s", code, errOut)
	}
	var st cli.DriverStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	if st.Kind != "DriverStatus" || st.Namespace != ns || st.Name != p || st.Phase != "Running" || st.StatefulSet != r.names.StatefulSet ||
		!strings.HasPrefix(st.DriverPod, r.names.DriverPodName()+" (uid "+string(r.pod.UID)+"), Running") ||
		st.Node != node+": "+inspect.NotVisibleNodes || strings.Join(st.NotVisible, ",") != "nodes" || st.Recoveries == nil || *st.Recoveries != 0 {
		t.Errorf("status -o json as a tenant: %+v", st)
	}
	code, out, _ = pluginAs(t, user, "status", p, "-n", ns)
	if code != 0 {
		t.Fatalf("status as a tenant: exit %d", code)
	}
	expectLines(t, "status as a tenant", out, `^Node: +`+node+`: not visible \(`, `^Recoveries: +0 `)

	code, out, _ = pluginAs(t, user, "why", p, "-n", ns)
	if code != 0 {
		t.Fatalf("why as a tenant: exit %d", code)
	}
	expectLines(t, "why as a tenant", out, `placeholder +Normal +\*Converted `)

	// logs: the flags reach the request (a container the pod lacks is refused before it is sent);
	// KWOK's nodes serve no logs, so what a log holds is the real-node test's (e2e/realnode).
	if code, _, errOut := pluginAs(t, user, "logs", p, "-n", ns, "-c", "nope"); code != 1 || !strings.Contains(errOut, `no container "nope"`) {
		t.Errorf("logs -c nope as a tenant: exit %d, %q", code, errOut)
	}
	// The edit role may read pods/log: the request passes the apiserver and reaches the node, whose
	// KWOK stand-in answers 404.
	code, _, errOut = pluginAs(t, user, "logs", p, "-n", ns, "--since", "5m", "--timestamps", "--tail", "1", "--request-timeout", "20s")
	if code != 1 || strings.Contains(errOut, "forbidden") || !strings.Contains(errOut, "could not find the requested resource ( pods/log") {
		t.Errorf("logs as a tenant: exit %d, %q; want KWOK's 404 for pods/log, past the apiserver's authorization", code, errOut)
	}
}

// inOrder fails unless each of words appears in out after the one before.
func inOrder(t *testing.T, out string, words ...string) {
	t.Helper()
	at := 0
	for _, w := range words {
		i := strings.Index(out[at:], w)
		if i < 0 {
			t.Errorf("%q is not after %q in:\n%s", w, out[:at], out)
			return
		}
		at += i + len(w)
	}
}
