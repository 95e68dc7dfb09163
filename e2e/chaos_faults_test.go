//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/e2e/chaos"
	"github.com/driverset/driverset/e2e/harness"
	"github.com/driverset/driverset/e2e/testbed"
)

// The node lane's pacing.
const (
	// nodeLossesAtOnce: node losses run side by side, as in a real outage.
	nodeLossesAtOnce = 3
	// minAliveNodes are kept alive, so that every lost driver has somewhere to go.
	minAliveNodes = 3
	// chaosExtraNodes are added at the start, so that losses at once still leave minAliveNodes.
	chaosExtraNodes = 3
	// silentHold is how long a silently dead node stays dead before it comes back: longer than
	// fence-after or self-fencing takes (the node's grace period, then 10 s or T + margin).
	silentHold = 40 * time.Second
	// driverWait is how long a node loss waits for a node that runs a driver.
	driverWait = 20 * time.Second
	// outOfServiceHold is how long the tainted node is kept before its Node is deleted.
	outOfServiceHold = 5 * time.Second
)

// replicaSet is driverset as installed: two replicas behind one address (harness.Proxy), the
// shared one (bed.driverset) and a second; the webhooks point at the proxy for the run.
type replicaSet struct {
	mu    sync.Mutex
	reps  [2]*harness.Driverset
	dirs  [2]string
	dead  [2]bool
	proxy *harness.Proxy
}

func (r *chaosRun) startReplicas() {
	t := r.t
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(bed.dir, "chaos-replica")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rs := &replicaSet{dirs: [2]string{bed.dir, dir}}
	rs.reps[0] = bed.driverset
	second, err := harness.Start(ctx, harness.Options{
		Binary: bed.binary, Kubeconfig: bed.cluster.KubeconfigPath, Dir: dir, Args: driversetArgs,
		ServiceAccount: "driverset-system/driverset", Metrics: true, CA: bed.driverset.CA,
		Alive: bed.cluster.CheckAlive,
	})
	if err != nil {
		t.Fatal(err)
	}
	rs.reps[1] = second
	r.replicas = rs
	t.Cleanup(func() {
		rs.mu.Lock()
		bed.driverset = rs.reps[0]
		restart := rs.dead[0]
		rs.mu.Unlock()
		restoreSharedDriverset(t, restart, func() {
			if rs.proxy != nil {
				_ = rs.proxy.Close()
			}
			rs.mu.Lock()
			defer rs.mu.Unlock()
			if !rs.dead[1] {
				_ = rs.reps[1].Stop()
			}
		})
	})
	if rs.proxy, err = harness.StartProxy(addr(rs.reps[0].Port), addr(second.Port)); err != nil {
		t.Fatal(err)
	}
	pointWebhooksAt(t, rs.proxy.Port)
	waitFor(t, 30*time.Second, "the apiserver calling the webhook through the proxy", func(ctx context.Context) (bool, error) {
		return harness.WaitWebhookActive(ctx, bed.cluster.Config, bed.cluster.CheckAlive) == nil, nil
	})
	for range chaosExtraNodes {
		r.addNode(ctx)
	}
}

// stopReplicas leaves both replicas running, for the cleanup to restore the shared setup.
func (r *chaosRun) stopReplicas() {
	for i := range r.replicas.reps {
		r.restartReplica(context.Background(), i, true)
	}
}

// killReplica SIGKILLs replica i, as a crash would.
func (r *chaosRun) killReplica(i int) {
	rs := r.replicas
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !rs.dead[i] {
		rs.reps[i].Kill()
		rs.dead[i] = true
	}
}

// restartReplica starts replica i again on its port (the proxy's backend), when dead (or always
// unless onlyDead).
func (r *chaosRun) restartReplica(ctx context.Context, i int, onlyDead bool) {
	rs := r.replicas
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if onlyDead && !rs.dead[i] {
		return
	}
	prev := rs.reps[i]
	err := retryFaults(ctx, func() error {
		d, err := harness.Start(ctx, harness.Options{
			Binary: bed.binary, Kubeconfig: bed.cluster.KubeconfigPath, Dir: rs.dirs[i], Args: driversetArgs,
			ServiceAccount: "driverset-system/driverset", Metrics: true, CA: prev.CA, Port: prev.Port,
			Alive: bed.cluster.CheckAlive,
		})
		if err == nil {
			rs.reps[i], rs.dead[i] = d, false
		}
		return err
	})
	if err != nil {
		r.t.Errorf("restart replica %d on port %d: %v", i, prev.Port, err)
	}
}

// leader is the index of the replica that leads, once one does (-1 if none within a minute).
func (r *chaosRun) leader(ctx context.Context) int {
	for deadline := time.Now().Add(time.Minute); ctx.Err() == nil && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		r.replicas.mu.Lock()
		reps, dead := r.replicas.reps, r.replicas.dead
		r.replicas.mu.Unlock()
		for i, d := range reps {
			if !dead[i] && isLeader(d) {
				return i
			}
		}
	}
	return -1
}

// controlLane runs the control-plane faults one after another.
func (r *chaosRun) controlLane(ctx context.Context) {
	for _, f := range r.sched.Control {
		// A leader is killed after leading for the gap (from its first sight), so that it is
		// killed while it works, not before it started; the other faults come after the gap.
		if f.Kind != chaos.LeaderKill && sleepCtx(ctx, f.Gap) != nil {
			return
		}
		start := time.Now()
		switch f.Kind {
		case chaos.LeaderKill:
			if r.leader(ctx) < 0 || sleepCtx(ctx, f.Gap) != nil {
				r.t.Errorf("chaos: no replica led within a minute")
				continue
			}
			i := r.leader(ctx)
			if i < 0 {
				r.t.Errorf("chaos: no replica led within a minute")
				continue
			}
			r.killReplica(i)
			_ = sleepCtx(ctx, f.Down)
			r.restartReplica(ctx, i, true)
		case chaos.BothReplicasDown:
			r.killReplica(0)
			r.killReplica(1)
			_ = sleepCtx(ctx, f.Down)
			r.restartReplica(ctx, 0, true)
			r.restartReplica(ctx, 1, true)
		case chaos.APIServerRestart, chaos.EtcdRestart, chaos.ControllerManagerRestart:
			name := map[chaos.Kind]string{chaos.APIServerRestart: testbed.ComponentAPIServer, chaos.EtcdRestart: testbed.ComponentEtcd,
				chaos.ControllerManagerRestart: testbed.ComponentControllerManager}[f.Kind]
			if _, err := bed.cluster.RestartComponent(ctx, name); err != nil {
				r.t.Errorf("chaos: restart %s: %v", name, err)
				continue
			}
		}
		r.count(f.Kind.String())
		r.t.Logf("chaos: %s (%s)", f.Kind, time.Since(start).Round(time.Millisecond))
	}
}

// nodeLane runs the node losses, up to nodeLossesAtOnce at a time.
func (r *chaosRun) nodeLane(ctx context.Context) {
	slots := make(chan struct{}, nodeLossesAtOnce)
	var wg sync.WaitGroup
	for _, f := range r.sched.Nodes {
		if sleepCtx(ctx, f.Gap) != nil {
			break
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			r.loseNode(ctx, f)
		})
	}
	wg.Wait()
}

// loseNode loses one node that runs a driver (Fault.Pick chooses among them), in f's way, and
// brings the test bed back to its size: a new node for a deleted one, the silent one revived.
func (r *chaosRun) loseNode(ctx context.Context, f chaos.Fault) {
	var node string
	var apps []string
	// A node running a driver is what the fault is for; after a while without one, any node.
	for waitDriver := time.Now().Add(driverWait); ctx.Err() == nil; {
		r.mu.Lock()
		cands, driven := r.ledger.Candidates()
		if len(cands) > 0 && r.ledger.AliveCount() > minAliveNodes && (driven || time.Now().After(waitDriver)) {
			node = cands[int(f.Pick%uint32(len(cands)))]
			apps = r.ledger.Kill(node)
		}
		r.mu.Unlock()
		if node != "" {
			break
		}
		time.Sleep(time.Second)
	}
	if node == "" {
		return
	}
	start := time.Now()
	var err error
	switch f.Kind {
	case chaos.NodeDeleted:
		err = r.deleteNode(ctx, node)
	case chaos.OutOfService:
		if err = bed.cluster.KillNode(ctx, node); err != nil {
			break
		}
		if err = waitNodeCondition(ctx, node, corev1.ConditionTrue, false); err != nil {
			break
		}
		if err = retryFaults(ctx, func() error { return bed.cluster.TaintOutOfService(ctx, node) }); err != nil {
			break
		}
		_ = sleepCtx(ctx, outOfServiceHold)
		err = r.deleteNode(ctx, node)
	case chaos.SilentDeath:
		if err = bed.cluster.KillNode(ctx, node); err != nil {
			break
		}
		_ = sleepCtx(ctx, silentHold)
		if err = bed.cluster.ReviveNode(ctx, node); err == nil {
			r.mu.Lock()
			r.ledger.AddNode(node)
			r.mu.Unlock()
		}
	}
	if err != nil {
		r.t.Errorf("chaos: %s of %s: %v", f.Kind, node, err)
		return
	}
	r.count(f.Kind.String())
	r.count("node losses")
	r.t.Logf("chaos: %s of %s, with the drivers of %v (%s)", f.Kind, node, apps, time.Since(start).Round(time.Millisecond))
}

// deleteNode deletes the Node and adds a new one in its place.
func (r *chaosRun) deleteNode(ctx context.Context, node string) error {
	if err := retryFaults(ctx, func() error { return bed.cluster.DeleteNode(ctx, node) }); err != nil {
		return err
	}
	r.mu.Lock()
	r.ledger.Remove(node)
	r.mu.Unlock()
	r.addNode(ctx)
	return nil
}

// addNode adds a fresh node to the test bed and the ledger. An attempt that meets the control
// plane's own faults (the run restarts the apiserver) is tried again under a new name: the test bed
// removes what the failed one made.
func (r *chaosRun) addNode(ctx context.Context) {
	var name string
	err := retryFaults(ctx, func() error {
		r.mu.Lock()
		r.nextNod++
		name = fmt.Sprintf("kwok-chaos-%d-%d", time.Now().Unix()%100000, r.nextNod)
		r.mu.Unlock()
		return bed.cluster.AddNode(ctx, name)
	})
	if err != nil {
		r.t.Errorf("chaos: add node %s: %v", name, err)
		return
	}
	r.mu.Lock()
	r.ledger.AddNode(name)
	r.mu.Unlock()
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
