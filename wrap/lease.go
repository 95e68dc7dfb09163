package wrap

import (
	"context"
	"fmt"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/driverset/driverset/contract"
)

// leaseRenewer keeps a coordination.k8s.io Lease as the driver's heartbeat, with the pod's own
// ServiceAccount. The Lease is owned by the pod, so the garbage collector removes it with the
// incarnation; its holder is the pod's UID. Each renewal is an update conditional on the version
// last written, so the controller sees every renewal as a new resourceVersion.
type leaseRenewer struct {
	leases   coordclient.LeaseInterface
	name     string
	pod      string
	holder   types.UID
	t        time.Duration
	acquired bool
	last     *coordinationv1.Lease
	now      func() time.Time
}

// newLeaseRenewer is the Renewer of a driver pod, from its environment (contract.EnvPodName,
// EnvPodUID, EnvPodNamespace: the downward API) and in-cluster credentials.
func newLeaseRenewer(name string, t time.Duration) (*leaseRenewer, error) {
	pod, uid, ns := os.Getenv(contract.EnvPodName), os.Getenv(contract.EnvPodUID), os.Getenv(contract.EnvPodNamespace)
	if pod == "" || uid == "" || ns == "" {
		return nil, fmt.Errorf("self-fencing needs $%s, $%s and $%s (the downward API)", contract.EnvPodName, contract.EnvPodUID, contract.EnvPodNamespace)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("self-fencing needs the pod's ServiceAccount token: %w", err)
	}
	// A renewal must fail fast rather than wait on a rate limiter or a dead connection.
	cfg.QPS, cfg.Burst, cfg.Timeout = -1, 0, t/4
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &leaseRenewer{leases: cs.CoordinationV1().Leases(ns), name: name, pod: pod, holder: types.UID(uid), t: t, now: time.Now}, nil
}

// Renew creates the Lease, takes it over from an earlier incarnation on the first renewal, and
// then renews it while this pod holds it.
func (l *leaseRenewer) Renew(ctx context.Context) error {
	now := metav1.NewMicroTime(l.now())
	if l.last == nil {
		cur, err := l.leases.Get(ctx, l.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return l.create(ctx, now)
		case err != nil:
			return classify(err)
		}
		l.last = cur
	}
	next := l.last.DeepCopy()
	if holder := next.Spec.HolderIdentity; holder == nil || types.UID(*holder) != l.holder {
		if l.acquired {
			return fmt.Errorf("%w (holder %v)", ErrHeartbeatTaken, holder)
		}
		next.Spec.HolderIdentity = new(string(l.holder))
		next.Spec.AcquireTime = &now
		next.OwnerReferences = l.owner()
	}
	next.Spec.RenewTime = &now
	next.Spec.LeaseDurationSeconds = new(int32(l.t / time.Second))
	updated, err := l.leases.Update(ctx, next, metav1.UpdateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		l.last = nil
		return l.create(ctx, now)
	case apierrors.IsConflict(err):
		l.last = nil // read it again on the next try
		return err
	case err != nil:
		return classify(err)
	}
	l.last, l.acquired = updated, true
	return nil
}

func (l *leaseRenewer) create(ctx context.Context, now metav1.MicroTime) error {
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.name, Labels: map[string]string{contract.LabelHeartbeat: "true"}, OwnerReferences: l.owner()},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: new(string(l.holder)), AcquireTime: &now, RenewTime: &now,
			LeaseDurationSeconds: new(int32(l.t / time.Second)),
		},
	}
	created, err := l.leases.Create(ctx, lease, metav1.CreateOptions{})
	if err != nil {
		return classify(err)
	}
	l.last, l.acquired = created, true
	return nil
}

// owner makes the pod own its heartbeat: the Lease goes with the incarnation.
func (l *leaseRenewer) owner() []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: l.pod, UID: l.holder}}
}

func classify(err error) error {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return fmt.Errorf("%w: %v (an admin binds the ClusterRole driverset-heartbeat to this pod's ServiceAccount in its namespace)", ErrHeartbeatRefused, err)
	}
	return err
}
