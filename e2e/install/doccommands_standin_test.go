//go:build testbed

package install

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podRun is one run-once pod of driverset's image whose command the stand-in ran.
type podRun struct {
	Pod  string
	Args []string
	Out  string
	Code int
}

// podRuns are the runs so far; the stand-in adds to them while a command waits on its pod.
type podRuns struct {
	mu  sync.Mutex
	all []podRun
}

func (r *podRuns) add(run podRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, run)
}

// of is the runs whose command is sub (check, uninstall-cleanup), in order.
func (r *podRuns) of(sub string) []podRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []podRun
	for _, run := range r.all {
		if len(run.Args) > 0 && run.Args[0] == sub {
			out = append(out, run)
		}
	}
	return out
}

// standInForRunOncePods plays the kubelet for the pods of driverset's namespace that run once
// (restartPolicy Never or OnFailure: helm test's pod, the hook and key-maker Jobs' pods), which KWOK starts but
// never ends: once such a pod runs, its one container's command (driverset with the pod's args)
// runs beside the test bed as the pod's ServiceAccount, with that account's rights alone, and the
// pod ends as the command did (exit code, last line as its termination message). So `helm test`
// and `helm uninstall` wait on what driverset's image would do in the cluster. It stops when t
// ends.
func standInForRunOncePods(t *testing.T, b *docBed) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		done := map[types.UID]bool{}
		for ctx.Err() == nil {
			pods, err := b.c.Client.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{})
			if err == nil {
				for i := range pods.Items {
					p := &pods.Items[i]
					if done[p.UID] || !runsOnce(p) {
						continue
					}
					done[p.UID] = true
					b.runPod(ctx, t, p)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	})
}

// runsOnce: p runs once (Never: helm test's pod, the uninstall hook's; OnFailure: the key-maker
// Job's) and its container is running now.
func runsOnce(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Spec.RestartPolicy != corev1.RestartPolicyAlways && len(p.Spec.Containers) == 1 &&
		len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
}

// runPod runs p's command as its ServiceAccount and ends p as it ended.
func (b *docBed) runPod(ctx context.Context, t *testing.T, p *corev1.Pod) {
	ctr := p.Spec.Containers[0]
	if len(ctr.Command) > 0 {
		t.Errorf("pod %s runs %v: the stand-in runs driverset's args only", p.Name, ctr.Command)
		return
	}
	kc, err := b.kubeconfigAs(p.Namespace, p.Spec.ServiceAccountName)
	if err != nil {
		t.Error(err)
		return
	}
	env, err := podEnv(p, ctr)
	if err != nil {
		t.Error(err)
		return
	}
	cmd := exec.CommandContext(ctx, filepath.Join(b.bin, "driverset"), append(slices.Clone(ctr.Args), "--kubeconfig="+kc)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Errorf("pod %s: %v", p.Name, err)
		return
	}
	t.Logf("stand-in: pod %s/%s ran driverset %s as %s: exit %d\n%s", p.Namespace, p.Name, strings.Join(ctr.Args, " "),
		p.Spec.ServiceAccountName, code, out)
	b.runs.add(podRun{Pod: p.Name, Args: ctr.Args, Out: string(out), Code: code})
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := b.c.TerminateContainer(ctx, p.Namespace, p.Name, ctr.Name, int32(code), lines[len(lines)-1]); err != nil && ctx.Err() == nil {
		t.Errorf("pod %s: %v", p.Name, err)
	}
}

// podEnv is the environment the kubelet would give ctr of p: plain values, and the pod's own name
// and namespace (the key-maker reads its namespace so). Anything else the stand-in cannot play.
func podEnv(p *corev1.Pod, ctr corev1.Container) ([]string, error) {
	var env []string
	for _, e := range ctr.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, e.Name+"="+p.Namespace)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env = append(env, e.Name+"="+p.Name)
		default:
			return nil, fmt.Errorf("pod %s: the stand-in cannot give %s its value (%v)", p.Name, e.Name, e.ValueFrom)
		}
	}
	return env, nil
}
