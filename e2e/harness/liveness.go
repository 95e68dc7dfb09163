package harness

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Liveness reports a component of the cluster that is down for good, naming it and giving the
// end of its log (the test bed's Cluster.CheckAlive), and nil while none is. A nil Liveness
// checks nothing: the harness's own unit tests have no component that could die.
type Liveness func() error

// poll is wait.PollUntilContextTimeout of cond (at once, then every interval), ending at once
// with l's error when a component of the cluster is down for good. Every wait of the harness
// on the cluster goes through it, as the scenarios' waitFor goes through Cluster.Alive: a dead
// etcd or apiserver then fails the test at the next poll, named, instead of as a timeout of
// whatever was waited for, with a message about that.
func (l Liveness) poll(ctx context.Context, interval, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		if l != nil {
			if err := l(); err != nil {
				return false, err
			}
		}
		return cond(ctx)
	})
}
