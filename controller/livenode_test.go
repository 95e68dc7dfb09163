package controller

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// slowReader answers every Get of a Node after release is closed, and counts the reads.
type slowReader struct {
	client.Reader
	reads   atomic.Int32
	release chan struct{}
	missing bool
}

func (s *slowReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	s.reads.Add(1)
	<-s.release
	if s.missing {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, key.Name)
	}
	obj.(*corev1.Node).ObjectMeta = metav1.ObjectMeta{Name: key.Name, ResourceVersion: "7"}
	return nil
}

// TestLiveNodeIsOneReadForThePassesThatAskAtOnce: the passes of the drivers of one lost node that
// ask for the Node while a read of it is under way share that read, as PodGC reads a node once
// for all its pods; a pass that asks after it ended reads again (nothing is kept).
func TestLiveNodeIsOneReadForThePassesThatAskAtOnce(t *testing.T) {
	for _, missing := range []bool{false, true} {
		reader := &slowReader{release: make(chan struct{}), missing: missing}
		r := &Placeholder{APIReader: reader}
		const passes = 8
		var wg sync.WaitGroup
		var asking atomic.Int32
		got := make([]*corev1.Node, passes)
		errs := make([]error, passes)
		for i := range passes {
			wg.Go(func() {
				asking.Add(1)
				got[i], errs[i] = r.liveNode(context.Background(), "node-a")
			})
		}
		// The read is answered only once every pass is about to ask (and a moment more, for
		// the last one to reach it) while the first one's read is under way.
		deadline := time.Now().Add(5 * time.Second)
		for (reader.reads.Load() == 0 || asking.Load() < passes) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		close(reader.release)
		wg.Wait()
		if n := reader.reads.Load(); n != 1 {
			t.Errorf("missing=%v: %d reads of the Node for %d passes at once, want 1", missing, n, passes)
		}
		for i := range passes {
			switch {
			case errs[i] != nil:
				t.Errorf("missing=%v: pass %d: %v", missing, i, errs[i])
			case missing && got[i] != nil:
				t.Errorf("missing=%v: pass %d got a Node, want nil (NotFound)", missing, i)
			case !missing && (got[i] == nil || got[i].Name != "node-a"):
				t.Errorf("missing=%v: pass %d got %v, want node-a", missing, i, got[i])
			}
		}
		if !missing && got[0] == got[1] {
			t.Errorf("passes share one Node object; each must get its own copy")
		}
		if _, err := r.liveNode(context.Background(), "node-a"); err != nil {
			t.Fatal(err)
		}
		if n := reader.reads.Load(); n != 2 {
			t.Errorf("missing=%v: a pass after the read ended made %d reads in all, want 2: nothing is kept", missing, n)
		}
	}
}
