package certs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Options of a Manager. Zero durations take the defaults named on each field.
type Options struct {
	// Client reaches the apiserver directly: the CA Secret and the webhook configuration are
	// outside the controller's cache, and every read must be fresh.
	Client kubernetes.Interface
	// Namespace holds the CA Secret and the webhook Service.
	Namespace string
	// SecretName is the CA Secret, e.g. "driverset-ca".
	SecretName string
	// ServiceName is the webhook Service, e.g. "driverset-webhook": the serving certificate's names.
	ServiceName string
	// ExtraHosts are more names or IP addresses for the serving certificate (e.g. 127.0.0.1 where
	// the webhook is registered by URL, as in the local test bed).
	ExtraHosts []string
	// WebhookConfigName is the MutatingWebhookConfiguration whose caBundles are kept, e.g. "driverset".
	WebhookConfigName string
	// CertDir is where tls.crt and tls.key are written for the webhook server, which reloads them.
	CertDir string

	CAValidity      time.Duration // default 5 years
	CARenewBefore   time.Duration // rotate the CA when it has this much left; default CAValidity/3
	ServingValidity time.Duration // default 90 days
	RenewBefore     time.Duration // renew the serving certificate this long before it ends; default ServingValidity/3
	// Interval is how often a replica re-reads the Secret and the webhook configuration; default 30s.
	Interval time.Duration
	// Settle is how long a change takes to reach every replica and apiserver: a new CA is trusted
	// this long before it signs, and an old one still trusted this long after it stopped.
	// Default 4×Interval; at least 2×Interval. Keep it above Interval plus the webhook server's
	// reload poll (10 s in controller-runtime, should a file event be missed).
	Settle time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Manager keeps a webhook's serving certificates when no cert-manager does. It runs on every
// replica (NeedLeaderElection is false) and needs no coordination but the apiserver's:
//
//   - The CA lives in a Secret. The first replica to find none creates it; the others lose the
//     create race (AlreadyExists) and read the winner's. Every change to the Secret is an update
//     conditional on its resourceVersion, so each rotation step is made exactly once.
//   - Each replica issues its own serving certificate from the active CA, locally, and writes it
//     to CertDir (key first, each file renamed into place). It renews it RenewBefore its end, and
//     re-issues it when the active CA changes.
//   - Every replica writes the bundle (all CAs the state trusts) into every webhook's caBundle when
//     it differs, with a JSON patch; the bundle's bytes are canonical, so replicas agree.
//   - CA rotation never breaks admission: the new CA enters the bundle first, signs only after every
//     webhook has trusted it for Settle, and the old CA leaves the bundle Settle after that. See
//     caState for the states.
//
// A rotation is forced with Rotate, or by deleting the Secret: a replica that still holds the CA
// recreates the Secret with that CA active and a new one incoming, which is the very same
// rotation. Deleting is the operator's lever (no tool needed); Rotate is the same step for code.
type Manager struct {
	o     Options
	hosts []string
	t     timing

	syncing sync.Mutex // one pass at a time: Start's loop, Rotate and EnsureOnce

	mu   sync.RWMutex
	seen *caState // the state last read or written
}

// NewManager checks o and fills in its defaults.
func NewManager(o Options) (*Manager, error) {
	switch {
	case o.Client == nil:
		return nil, errors.New("certs: Client is required")
	case o.Namespace == "" || o.SecretName == "" || o.ServiceName == "" || o.WebhookConfigName == "" || o.CertDir == "":
		return nil, errors.New("certs: Namespace, SecretName, ServiceName, WebhookConfigName and CertDir are required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.CAValidity, 5*365*24*time.Hour)
	def(&o.CARenewBefore, o.CAValidity/3)
	def(&o.ServingValidity, 90*24*time.Hour)
	def(&o.RenewBefore, o.ServingValidity/3)
	def(&o.Interval, 30*time.Second)
	def(&o.Settle, 4*o.Interval)
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case o.CARenewBefore >= o.CAValidity || o.RenewBefore >= o.ServingValidity:
		return nil, errors.New("certs: a renewal must start before the certificate ends")
	case o.Settle < 2*o.Interval:
		return nil, fmt.Errorf("certs: Settle %v must be at least twice Interval %v: every replica must see each step", o.Settle, o.Interval)
	case o.CARenewBefore < 2*o.Settle+o.Interval:
		return nil, fmt.Errorf("certs: CARenewBefore %v leaves no time for a rotation (two Settles and an Interval)", o.CARenewBefore)
	}
	return &Manager{
		o:     o,
		hosts: ServingHosts(o.ServiceName, o.Namespace, o.ExtraHosts...),
		t:     timing{CARenewBefore: o.CARenewBefore, Settle: o.Settle},
	}, nil
}

// NeedLeaderElection is false: every replica serves the webhook, so every replica needs a certificate.
func (m *Manager) NeedLeaderElection() bool { return false }

// Start keeps the certificates until ctx ends (manager.Runnable).
func (m *Manager) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("certs")
	for {
		wake, err := m.sync(ctx, false)
		delay := m.o.Interval
		switch {
		case err != nil:
			logger.Error(err, "keeping webhook certificates; retrying")
			delay = min(m.o.Interval, 2*time.Second)
		case wake.After(m.o.Now()):
			// A little past the threshold, so that the next pass is on the far side of it.
			delay = min(wake.Sub(m.o.Now())+10*time.Millisecond, m.o.Interval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
}

// EnsureOnce makes one pass: the CA Secret exists, the webhooks trust it, and CertDir holds a
// serving certificate. Call it before the webhook server starts, which refuses to start without
// one. Conflicts with other replicas' passes are retried.
func (m *Manager) EnsureOnce(ctx context.Context) error {
	return m.retryConflicts(ctx, false)
}

// Rotate starts a CA rotation now (no-op when one is under way) and makes one pass. It returns
// once the Secret holds the incoming CA and the webhooks trust it; the rest of the rotation
// follows on every replica's Start loop, Settle apart.
func (m *Manager) Rotate(ctx context.Context) error {
	return m.retryConflicts(ctx, true)
}

func (m *Manager) retryConflicts(ctx context.Context, force bool) error {
	var err error
	for range 5 {
		if _, err = m.sync(ctx, force); !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return err
}

// sync is one pass; wake is when the next pass is due by time alone.
func (m *Manager) sync(ctx context.Context, force bool) (wake time.Time, err error) {
	m.syncing.Lock()
	defer m.syncing.Unlock()
	// A pass that stalls must not act on a view older than Settle: that view could lack a CA
	// that others have since started to sign with.
	ctx, cancel := context.WithTimeout(ctx, min(m.o.Settle/2, time.Minute))
	defer cancel()
	logger := log.FromContext(ctx).WithName("certs")
	now := m.o.Now()

	cfg, err := m.readWebhooks(ctx)
	if err != nil {
		return wake, err
	}
	sec, st, err := m.loadOrCreate(ctx, now, bundleInAPI(cfg))
	if err != nil {
		return wake, err
	}
	for range 5 { // at most: retire, start, trusted (promote waits for Settle)
		s := st.plan(now, m.t, trustedByAll(cfg, st.next), force)
		if s == stepNone {
			break
		}
		var ca *Authority
		if s == stepStart {
			force = false
			if ca, err = m.newCA(now); err != nil {
				return wake, err
			}
		}
		next := st.apply(s, now, m.t, ca)
		if sec, err = m.write(ctx, sec, next); err != nil {
			return wake, fmt.Errorf("CA rotation step %s: %w", s, err)
		}
		logger.Info("CA rotation", "step", s.String(), "active", next.active.Cert.Subject.CommonName)
		st = next
	}
	m.remember(st)

	patched, injectErr := m.inject(ctx, cfg, st.bundle())
	if patched > 0 {
		logger.Info("injected caBundle", "webhooks", patched, "cas", len(st.bundle()))
	}
	servingWake, servingErr := m.ensureServing(ctx, st, now, injectErr == nil)
	return earliest(st.wakeAt(m.t), servingWake), errors.Join(injectErr, servingErr)
}

// loadOrCreate reads the CA Secret, or creates it (see recovered) when there is none.
func (m *Manager) loadOrCreate(ctx context.Context, now time.Time, inAPI Bundle) (*corev1.Secret, caState, error) {
	secrets := m.o.Client.CoreV1().Secrets(m.o.Namespace)
	sec, err := secrets.Get(ctx, m.o.SecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		ca, caErr := m.newCA(now)
		if caErr != nil {
			return nil, caState{}, caErr
		}
		fresh := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: m.o.SecretName, Namespace: m.o.Namespace},
			Type:       corev1.SecretTypeOpaque,
		}
		if encErr := recovered(m.remembered(), inAPI, now, m.t, ca).encode(fresh); encErr != nil {
			return nil, caState{}, encErr
		}
		sec, err = secrets.Create(ctx, fresh, metav1.CreateOptions{FieldManager: fieldManager})
		if apierrors.IsAlreadyExists(err) {
			// Another replica won the race: its CA is the CA.
			log.FromContext(ctx).WithName("certs").Info("CA secret created by another replica", "secret", m.o.SecretName)
			sec, err = secrets.Get(ctx, m.o.SecretName, metav1.GetOptions{})
		} else if err == nil {
			log.FromContext(ctx).WithName("certs").Info("created CA secret", "secret", m.o.SecretName)
		}
	}
	if err != nil {
		return nil, caState{}, fmt.Errorf("CA secret %s/%s: %w", m.o.Namespace, m.o.SecretName, err)
	}
	st, err := decodeState(sec)
	return sec, st, err
}

// write stores st in the Secret, conditional on the resourceVersion read.
func (m *Manager) write(ctx context.Context, sec *corev1.Secret, st caState) (*corev1.Secret, error) {
	sec = sec.DeepCopy()
	if err := st.encode(sec); err != nil {
		return nil, err
	}
	return m.o.Client.CoreV1().Secrets(m.o.Namespace).Update(ctx, sec, metav1.UpdateOptions{FieldManager: fieldManager})
}

func (m *Manager) newCA(now time.Time) (*Authority, error) {
	return newAuthority("driverset-webhook-ca-"+now.UTC().Format("20060102T150405Z"), now, m.o.CAValidity)
}

// ensureServing replaces CertDir's certificate when renewal says so. caTrusted says the webhooks
// hold the current bundle; without it a certificate is not switched to a new CA.
func (m *Manager) ensureServing(ctx context.Context, st caState, now time.Time, caTrusted bool) (wake time.Time, err error) {
	leaf, err := readServing(m.o.CertDir)
	if err != nil {
		return wake, err
	}
	reason, switchCA := renewal(leaf, st.active.Cert, m.hosts, now, m.o.RenewBefore)
	if reason == "" || (switchCA && !caTrusted) {
		return leaf.NotAfter.Add(-m.o.RenewBefore), nil
	}
	notAfter := earliest(now.Add(m.o.ServingValidity), st.active.Cert.NotAfter)
	certPEM, keyPEM, err := st.active.issueServing(m.hosts, now, notAfter)
	if err != nil {
		return wake, err
	}
	if err := WriteKeyPair(m.o.CertDir, certPEM, keyPEM); err != nil {
		return wake, fmt.Errorf("writing serving certificate: %w", err)
	}
	log.FromContext(ctx).WithName("certs").Info("issued serving certificate", "reason", reason,
		"ca", st.active.Cert.Subject.CommonName, "notAfter", notAfter)
	return notAfter.Add(-m.o.RenewBefore), nil
}

func (m *Manager) remember(st caState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen = &st
}

func (m *Manager) remembered() *caState {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.seen
}
