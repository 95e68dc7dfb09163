package certs

import (
	"crypto/x509"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The CA Secret. Its keys are read by every replica; its annotations are the rotation's clock.
const (
	// SecretKeyCACert and SecretKeyCAKey hold the active CA: the one that signs serving certificates.
	SecretKeyCACert = "ca.crt"
	SecretKeyCAKey  = "ca.key"
	// SecretKeyNextCert and SecretKeyNextKey hold the incoming CA during a rotation: trusted, not yet signing.
	SecretKeyNextCert = "next.crt"
	SecretKeyNextKey  = "next.key"
	// SecretKeyOldCerts holds the outgoing CAs after a rotation (certificates only): trusted, never signing.
	SecretKeyOldCerts = "old.crt"

	// AnnotationNextTrustedSince is when a replica first saw the incoming CA in every webhook's
	// caBundle (RFC 3339). The CA is promoted Settle after that.
	AnnotationNextTrustedSince = "driverset.dev/ca-next-trusted-since"
	// AnnotationOldUntil is when the outgoing CAs leave the bundle (RFC 3339).
	AnnotationOldUntil = "driverset.dev/ca-old-until"
)

// caState is what the CA Secret holds. A rotation goes through three states, one conditional
// update of the Secret each, so that exactly one replica makes each step:
//
//	stable    active=A                  bundle A      serving certs from A
//	adding    active=A next=B           bundle B+A    serving certs from A
//	retiring  active=B old=A            bundle B+A    serving certs from B
//	stable    active=B                  bundle B
//
// adding → retiring waits until every webhook's caBundle in the API holds B and has held it for
// Settle (so that every apiserver's informer has it): serving certificates switch to B only then.
// retiring → stable waits Settle after the switch: every replica re-reads the Secret within one
// Interval and its webhook server reloads the files within seconds, so by then no replica still
// presents a certificate from A.
type caState struct {
	active           *Authority
	next             *Authority
	nextTrustedSince time.Time // zero until every webhook trusts next
	old              Bundle
	oldUntil         time.Time
}

// bundle is every CA the webhooks must trust in this state.
func (s caState) bundle() Bundle {
	certs := []*x509.Certificate{s.active.Cert}
	if s.next != nil {
		certs = append(certs, s.next.Cert)
	}
	return mergeBundle(append(certs, s.old...)...)
}

// timing is what the rotation's decisions depend on.
type timing struct {
	CARenewBefore time.Duration // rotate when the active CA has less than this left
	Settle        time.Duration // how long a bundle change takes to reach every apiserver and replica
}

// step is one change of the rotation.
type step int

const (
	stepNone     step = iota
	stepStart         // make the next CA: the bundle gains it, nothing signs with it yet
	stepTrusted       // every webhook's caBundle holds next: start the Settle clock
	stepDistrust      // a webhook lost next (someone rewrote the configuration): restart the clock
	stepPromote       // next signs; the former active stays trusted until Settle from now
	stepRetire        // the outgoing CAs leave the bundle
)

func (s step) String() string {
	return [...]string{"none", "start", "trusted", "distrust", "promote", "retire"}[s]
}

// plan is the next step of the rotation at now. webhooksTrustNext says whether every webhook's
// caBundle in the API holds the next CA; force starts a rotation now (Rotate).
func (s caState) plan(now time.Time, t timing, webhooksTrustNext, force bool) step {
	switch {
	case len(s.old) > 0 && !now.Before(s.oldUntil):
		return stepRetire
	case s.next == nil:
		if force || !now.Before(s.active.Cert.NotAfter.Add(-t.CARenewBefore)) {
			return stepStart
		}
	case !webhooksTrustNext:
		if !s.nextTrustedSince.IsZero() {
			return stepDistrust
		}
	case s.nextTrustedSince.IsZero():
		return stepTrusted
	case !now.Before(s.nextTrustedSince.Add(t.Settle)):
		return stepPromote
	case !now.Before(s.active.Cert.NotAfter):
		// An expired CA protects nothing: waiting out Settle only prolongs the outage.
		return stepPromote
	}
	return stepNone
}

// apply makes step; newCA is used by stepStart only.
func (s caState) apply(st step, now time.Time, t timing, newCA *Authority) caState {
	switch st {
	case stepStart:
		s.next, s.nextTrustedSince = newCA, time.Time{}
	case stepTrusted:
		s.nextTrustedSince = now
	case stepDistrust:
		s.nextTrustedSince = time.Time{}
	case stepPromote:
		// Older outgoing CAs are past their time by now (see plan's order); keeping them the
		// extra Settle costs nothing and needs no argument.
		s.old = mergeBundle(append(Bundle{s.active.Cert}, s.old...)...)
		s.oldUntil = now.Add(t.Settle)
		s.active, s.next, s.nextTrustedSince = s.next, nil, time.Time{}
	case stepRetire:
		s.old, s.oldUntil = nil, time.Time{}
	}
	return s
}

// wakeAt is the earliest time at which plan may answer differently by time alone.
func (s caState) wakeAt(t timing) time.Time {
	at := s.active.Cert.NotAfter
	if s.next == nil {
		at = s.active.Cert.NotAfter.Add(-t.CARenewBefore)
	}
	if !s.nextTrustedSince.IsZero() {
		at = earliest(at, s.nextTrustedSince.Add(t.Settle))
	}
	if len(s.old) > 0 {
		at = earliest(at, s.oldUntil)
	}
	return at
}

// recovered is the state a replica writes when the Secret is gone (deleted by an operator to
// force a rotation, or never made). inAPI is the caBundle the webhooks hold now.
//
// A replica that still knows the CA it served with (cached) restarts from it with a rotation
// under way, exactly as Rotate does: nothing that was trusted stops being trusted. Without that
// knowledge (every replica restarted since) a new CA signs at once, and whatever valid CAs the
// webhooks trusted stay trusted for Settle, so certificates still presented by replicas that have
// not switched yet keep verifying.
func recovered(cached *caState, inAPI Bundle, now time.Time, t timing, newCA *Authority) caState {
	var s caState
	if cached != nil && now.Before(cached.active.Cert.NotAfter) {
		s.active = cached.active
		s.next = cached.next
		if s.next == nil {
			s.next = newCA
		}
	} else {
		s.active = newCA
	}
	for _, c := range inAPI.validAt(now) {
		if !c.Equal(s.active.Cert) && (s.next == nil || !c.Equal(s.next.Cert)) {
			s.old = append(s.old, c)
		}
	}
	if len(s.old) > 0 {
		s.old = mergeBundle(s.old...)
		s.oldUntil = now.Add(t.Settle)
	}
	return s
}

// encode writes s into sec's data and annotations, leaving the rest of sec alone.
func (s caState) encode(sec *corev1.Secret) error {
	data := map[string][]byte{SecretKeyCACert: s.active.CertPEM}
	var err error
	if data[SecretKeyCAKey], err = s.active.KeyPEM(); err != nil {
		return err
	}
	if s.next != nil {
		data[SecretKeyNextCert] = s.next.CertPEM
		if data[SecretKeyNextKey], err = s.next.KeyPEM(); err != nil {
			return err
		}
	}
	if len(s.old) > 0 {
		data[SecretKeyOldCerts] = s.old.PEM()
	}
	sec.Data = data
	if sec.Annotations == nil {
		sec.Annotations = map[string]string{}
	}
	setTime(sec.Annotations, AnnotationNextTrustedSince, s.nextTrustedSince)
	setTime(sec.Annotations, AnnotationOldUntil, s.oldUntil)
	return nil
}

// decodeState reads a CA Secret. A Secret it cannot read is an error, never overwritten: an
// operator deletes it to start afresh.
func decodeState(sec *corev1.Secret) (caState, error) {
	var s caState
	var err error
	if s.active, err = ParseAuthority(sec.Data[SecretKeyCACert], sec.Data[SecretKeyCAKey]); err != nil {
		return s, fmt.Errorf("secret %s/%s: active CA: %w", sec.Namespace, sec.Name, err)
	}
	if len(sec.Data[SecretKeyNextCert]) > 0 {
		if s.next, err = ParseAuthority(sec.Data[SecretKeyNextCert], sec.Data[SecretKeyNextKey]); err != nil {
			return s, fmt.Errorf("secret %s/%s: next CA: %w", sec.Namespace, sec.Name, err)
		}
	}
	if s.old, err = ParseBundle(sec.Data[SecretKeyOldCerts]); err != nil {
		return s, fmt.Errorf("secret %s/%s: old CAs: %w", sec.Namespace, sec.Name, err)
	}
	if s.nextTrustedSince, err = getTime(sec.Annotations, AnnotationNextTrustedSince); err != nil {
		return s, err
	}
	if s.oldUntil, err = getTime(sec.Annotations, AnnotationOldUntil); err != nil {
		return s, err
	}
	return s, nil
}

func setTime(m map[string]string, key string, t time.Time) {
	if t.IsZero() {
		delete(m, key)
		return
	}
	m[key] = t.UTC().Format(time.RFC3339Nano)
}

func getTime(m map[string]string, key string) (time.Time, error) {
	v, ok := m[key]
	if !ok || v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("annotation %s: %w", key, err)
	}
	return t, nil
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
