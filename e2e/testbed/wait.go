package testbed

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// pollInterval is short: the tests measure recovery times, and every poll is a loopback GET.
const pollInterval = 200 * time.Millisecond

// waitFor polls cond until it holds, the context ends, startPhaseTimeout passes, or a
// component dies (then the error carries the end of its log, which is nearly always the reason).
func (c *Cluster) waitFor(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, startPhaseTimeout, true, c.Alive(func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err // transient while components start; reported only on timeout
		}
		return ok, nil
	}))
	if err != nil {
		if last != nil {
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, err, last)
		}
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

// CheckAlive reports a control-plane component that exited although nobody stopped it and that
// will not run again, with the end of its log: etcd, the apiserver, CoreDNS, or a controller-manager
// or scheduler the supervisor gave up on. A test's waits call it on each poll, so that such an
// exit fails the test at once, named, rather than as a timeout of whatever waited on it.
func (c *Cluster) CheckAlive() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return fmt.Errorf("test bed stopped")
	}
	for name, p := range c.procs {
		if p.exited() && downForGood(name, c.givenUp[name]) {
			return fmt.Errorf("%s exited (%v); end of %s:\n%s", name, p.err, c.logPath(name), tail(c.logPath(name), 2000))
		}
	}
	return nil
}

func (c *Cluster) etcdHealthy(ctx context.Context) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.lay.etcdURL()+"/health", nil)
	if err != nil {
		return false, err
	}
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"health":"true"`), nil
}

func (c *Cluster) apiserverReady(ctx context.Context) (bool, error) {
	body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(body)) == "ok", nil
}

// defaultServiceAccountExists: the ServiceAccount admission plugin refuses pods until the
// controller-manager has created `default` in their namespace (~7 s after the apiserver).
func (c *Cluster) defaultServiceAccountExists(ctx context.Context) (bool, error) {
	return c.serviceAccountExists(ctx, metav1.NamespaceDefault)
}

func (c *Cluster) serviceAccountExists(ctx context.Context, ns string) (bool, error) {
	_, err := c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// WaitForDefaultServiceAccount waits until namespace ns has its `default` ServiceAccount, so
// that pods can be created there. Tests call it after creating a namespace.
func (c *Cluster) WaitForDefaultServiceAccount(ctx context.Context, ns string) error {
	return c.waitFor(ctx, "ServiceAccount "+ns+"/default", func(ctx context.Context) (bool, error) {
		return c.serviceAccountExists(ctx, ns)
	})
}

// Alive is cond, failing as soon as c has a component down for good (CheckAlive): a wait on
// anything in the cluster then ends with that component's log, not with its own timeout.
func (c *Cluster) Alive(cond func(context.Context) (bool, error)) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		if err := c.CheckAlive(); err != nil {
			return false, err
		}
		return cond(ctx)
	}
}
