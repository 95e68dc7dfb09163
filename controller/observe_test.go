package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/contract"
)

// staleNodes is a cache whose Nodes are as node says, whatever the apiserver has.
type staleNodes struct {
	client.Client
	node *corev1.Node
}

func (c staleNodes) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if n, ok := obj.(*corev1.Node); ok && key.Name == c.node.Name {
		c.node.DeepCopyInto(n)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestObserveReadsTheNodeLiveBeforeAFence: the snapshot says where each reading was taken and
// when; a fence that the cache's Node asks for is planned only on the Node read again from the
// apiserver, which decides.
func TestObserveReadsTheNodeLiveBeforeAFence(t *testing.T) {
	lostAt := t0.Add(2 * time.Minute)
	lost := nodeWith(corev1.ConditionUnknown, lostAt, unreachableTaints()...)
	lost.Name = "node-a"
	for _, c := range []struct {
		name   string
		live   corev1.ConditionStatus // node-a's Ready on the apiserver
		fenced bool
	}{
		{name: "the apiserver says the node is back: no fence", live: corev1.ConditionTrue},
		{name: "the apiserver says it is lost too: fenced", live: corev1.ConditionUnknown, fenced: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := runningCluster(t, map[string]string{contract.AnnotationFenceAfter: "1m"}, nil)
			h.setNode("node-b", corev1.ConditionTrue, t0) // a zone not disrupted: fencing may follow
			h.setNode("node-a", c.live, lostAt, unreachableTaints()...)
			h.r.Client = staleNodes{Client: h.r.Client, node: lost}
			h.now = lostAt.Add(5 * time.Minute)

			s, err := h.r.observe(h.ctx, h.p)
			if err != nil {
				t.Fatal(err)
			}
			if _, done, err := h.r.provision(h.ctx, s); done || err != nil {
				t.Fatalf("provisioning a running app: done %v, %v", done, err)
			}
			if err := h.r.observeDriver(h.ctx, s); err != nil {
				t.Fatal(err)
			}
			if s.Node.From != FromCache || nodeReadyTrue(s.Node.Value) {
				t.Fatalf("before planning, the Node is %s from %s; want the cache's lost one", s.Node.Value.Name, s.Node.From)
			}
			pl, err := h.r.planWith(h.ctx, s, plan)
			if err != nil {
				t.Fatal(err)
			}
			for what, got := range map[string]Source{"placeholder": s.Placeholder.From, "StatefulSet": s.StatefulSet.From, "S-0": s.Driver.From} {
				if got != FromCache {
					t.Errorf("%s read from %q, want the cache", what, got)
				}
			}
			if s.Node.From != FromAPIServer || !s.Node.At.Equal(h.now) || s.LiveNodes["node-a"] == nil {
				t.Errorf("Node read from %q at %s (live: %v), want the apiserver at %s", s.Node.From, s.Node.At, s.LiveNodes["node-a"] != nil, h.now)
			}
			if s.Zone.From != FromCache || s.Heartbeat.From != Skipped {
				t.Errorf("zone from %q, heartbeat from %q; want the cache's zone and no heartbeat (the driver does not self-fence)", s.Zone.From, s.Heartbeat.From)
			}
			fenced := false
			for _, st := range pl.Steps {
				_, isFence := st.(fenceStep)
				fenced = fenced || isFence
			}
			if fenced != c.fenced {
				t.Errorf("fence planned: %v, want %v (steps %#v)", fenced, c.fenced, pl.Steps)
			}
		})
	}
}

// TestObserveAsksWhyTheDriverIsMissingOnlyPastTheGrace: while S-0 is missing, the StatefulSet's
// Events are read live, and only once missingDriverGrace has passed since S was made; before, the
// snapshot says the reading was skipped.
func TestObserveAsksWhyTheDriverIsMissingOnlyPastTheGrace(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.reconcile() // S and H made at t0; the StatefulSet controller has not made S-0
	for _, c := range []struct {
		after time.Duration
		from  Source
	}{
		{after: missingDriverGrace - time.Second, from: Skipped},
		{after: missingDriverGrace, from: FromAPIServer},
	} {
		h.now = t0.Add(c.after)
		s, err := h.r.observe(h.ctx, h.p)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.r.observeDriver(h.ctx, s); err != nil {
			t.Fatal(err)
		}
		if s.Driver.Value != nil || s.MissingDriver.From != c.from || !s.MissingDriver.At.Equal(h.now) {
			t.Errorf("%s after S was made: S-0 %v, why it is missing read from %q at %s; want none, from %q at %s",
				c.after, s.Driver.Value != nil, s.MissingDriver.From, s.MissingDriver.At, c.from, h.now)
		}
	}
}
