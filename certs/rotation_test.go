package certs

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func mustCA(t *testing.T, name string, now time.Time, validity time.Duration) *Authority {
	t.Helper()
	ca, err := newAuthority(name, now, validity)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestPlan(t *testing.T) {
	tm := timing{CARenewBefore: 30 * time.Hour, Settle: time.Hour}
	a := mustCA(t, "A", t0, 100*time.Hour) // enters its renewal window at t0+70h
	b := mustCA(t, "B", t0, 100*time.Hour)
	stable := caState{active: a}
	adding := caState{active: a, next: b}
	trusted := caState{active: a, next: b, nextTrustedSince: t0.Add(time.Hour)}
	retiring := caState{active: b, old: Bundle{a.Cert}, oldUntil: t0.Add(2 * time.Hour)}

	for _, tc := range []struct {
		name          string
		state         caState
		at            time.Time
		webhooksTrust bool // every webhook's caBundle holds the next CA
		force         bool
		want          step
	}{
		{"a young CA is left alone", stable, t0.Add(time.Hour), true, false, stepNone},
		{"a CA in its renewal window gets a successor", stable, t0.Add(70 * time.Hour), true, false, stepStart},
		{"Rotate starts a rotation at any time", stable, t0.Add(time.Hour), true, true, stepStart},
		{"the successor waits until the webhooks trust it", adding, t0.Add(80 * time.Hour), false, false, stepNone},
		{"once they do, the settle clock starts", adding, t0.Add(80 * time.Hour), true, false, stepTrusted},
		{"Rotate during a rotation changes nothing", adding, t0.Add(80 * time.Hour), false, true, stepNone},
		{"a trusted successor waits out Settle", trusted, t0.Add(time.Hour + 59*time.Minute), true, false, stepNone},
		{"after Settle the successor signs", trusted, t0.Add(2 * time.Hour), true, false, stepPromote},
		{"a webhook that lost the successor restarts the clock", trusted, t0.Add(3 * time.Hour), false, false, stepDistrust},
		{"an expired CA is replaced without waiting out Settle", caState{active: a, next: b, nextTrustedSince: t0.Add(100 * time.Hour)}, t0.Add(100 * time.Hour), true, false, stepPromote},
		{"but never by a CA the webhooks do not trust", adding, t0.Add(101 * time.Hour), false, false, stepNone},
		{"the outgoing CA stays trusted until its time", retiring, t0.Add(time.Hour), true, false, stepNone},
		{"then it leaves the bundle", retiring, t0.Add(2 * time.Hour), true, false, stepRetire},
		{"Rotate right after a rotation starts the next one", retiring, t0.Add(time.Hour), true, true, stepStart},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.state.plan(tc.at, tm, tc.webhooksTrust, tc.force); got != tc.want {
				t.Errorf("plan = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestRotationNeverBreaksAdmission runs whole rotations against a simulated webhook
// configuration and checks, at every tick, what the apiserver needs: the CA that signs the
// serving certificates has been in the caBundle for at least Settle, and a CA leaves the bundle
// only Settle after it stopped signing.
func TestRotationNeverBreaksAdmission(t *testing.T) {
	tm := timing{CARenewBefore: 10 * time.Hour, Settle: time.Hour}
	tick := 10 * time.Minute
	now := t0
	st := caState{active: mustCA(t, "first", now, 30*time.Hour)}
	var inAPI Bundle
	since := map[string]time.Time{}   // CA → when it entered the API's bundle
	stopped := map[string]time.Time{} // CA → when it stopped signing
	signer := st.active
	rotations := 0
	forced := false

	for ; now.Before(t0.Add(100 * time.Hour)); now = now.Add(tick) {
		force := !forced && now.After(t0.Add(3*time.Hour)) // one forced rotation early on
		for {
			s := st.plan(now, tm, trustedByBundle(inAPI, st.next), force)
			if s == stepNone {
				break
			}
			var ca *Authority
			if s == stepStart {
				force, forced = false, true
				ca = mustCA(t, now.Format(time.Kitchen), now, 30*time.Hour)
			}
			if s == stepPromote {
				rotations++
			}
			st = st.apply(s, now, tm, ca)
		}
		// The webhook configuration takes the bundle; serving certificates follow the active CA.
		for _, c := range inAPI {
			if !st.bundle().Contains(c) {
				if at, ok := stopped[c.Subject.CommonName]; !ok || now.Sub(at) < tm.Settle {
					t.Fatalf("%v: CA %s left the bundle %v after it stopped signing", now, c.Subject.CommonName, now.Sub(at))
				}
			}
		}
		for _, c := range st.bundle() {
			if !inAPI.Contains(c) {
				since[c.Subject.CommonName] = now
			}
		}
		inAPI = st.bundle()
		if signer != st.active {
			stopped[signer.Cert.Subject.CommonName] = now
			signer = st.active
			if in, ok := since[signer.Cert.Subject.CommonName]; !ok || now.Sub(in) < tm.Settle {
				t.Fatalf("%v: CA %s signs after %v in the bundle", now, signer.Cert.Subject.CommonName, now.Sub(in))
			}
		}
		if !now.Before(signer.Cert.NotAfter) {
			t.Fatalf("%v: signing CA %s has expired", now, signer.Cert.Subject.CommonName)
		}
	}
	// One forced rotation and, in 100 h of 30 h CAs, at least three for age.
	if rotations < 4 {
		t.Errorf("%d rotations in 100 h, want at least 4", rotations)
	}
	if len(inAPI) > 2 {
		t.Errorf("bundle holds %d CAs at rest, want at most 2", len(inAPI))
	}
}

func trustedByBundle(b Bundle, next *Authority) bool { return next == nil || b.Contains(next.Cert) }

func TestRecovered(t *testing.T) {
	tm := timing{CARenewBefore: 10 * time.Hour, Settle: time.Hour}
	a := mustCA(t, "A", t0, 30*time.Hour)
	old := mustCA(t, "old", t0, 30*time.Hour)
	expired := mustCA(t, "expired", t0.Add(-40*time.Hour), 30*time.Hour)
	fresh := mustCA(t, "fresh", t0, 30*time.Hour)
	inAPI := mergeBundle(a.Cert, old.Cert, expired.Cert)

	t.Run("a replica that knows its CA starts a rotation from it", func(t *testing.T) {
		s := recovered(&caState{active: a}, inAPI, t0, tm, fresh)
		if s.active != a || s.next != fresh {
			t.Fatalf("active %v next %v; want A then fresh", name(s.active), name(s.next))
		}
		if !s.old.Contains(old.Cert) || s.old.Contains(expired.Cert) || s.old.Contains(a.Cert) {
			t.Errorf("old = %v; want the still-valid foreign CA only", names(s.old))
		}
		if !s.oldUntil.Equal(t0.Add(tm.Settle)) {
			t.Errorf("oldUntil = %v", s.oldUntil)
		}
	})
	t.Run("a rotation under way keeps its incoming CA", func(t *testing.T) {
		b := mustCA(t, "B", t0, 30*time.Hour)
		s := recovered(&caState{active: a, next: b, nextTrustedSince: t0}, inAPI, t0, tm, fresh)
		if s.active != a || s.next != b || !s.nextTrustedSince.IsZero() {
			t.Fatalf("active %v next %v since %v; want A, B, not yet trusted", name(s.active), name(s.next), s.nextTrustedSince)
		}
	})
	t.Run("with nothing known, the new CA signs and what the webhooks trusted stays trusted", func(t *testing.T) {
		s := recovered(nil, inAPI, t0, tm, fresh)
		if s.active != fresh || s.next != nil {
			t.Fatalf("active %v next %v; want fresh, none", name(s.active), name(s.next))
		}
		if !s.old.Contains(a.Cert) || !s.old.Contains(old.Cert) || s.old.Contains(expired.Cert) {
			t.Errorf("old = %v; want A and old", names(s.old))
		}
	})
	t.Run("a fresh install trusts only its CA", func(t *testing.T) {
		s := recovered(nil, nil, t0, tm, fresh)
		if s.active != fresh || len(s.old) != 0 || !s.oldUntil.IsZero() {
			t.Errorf("got active %v old %v until %v", name(s.active), names(s.old), s.oldUntil)
		}
	})
}

func TestStateSurvivesTheSecret(t *testing.T) {
	a := mustCA(t, "A", t0, 30*time.Hour)
	b := mustCA(t, "B", t0, 30*time.Hour)
	old := mustCA(t, "old", t0, 30*time.Hour)
	for _, st := range []caState{
		{active: a},
		{active: a, next: b, nextTrustedSince: t0.Add(time.Minute)},
		{active: b, old: Bundle{a.Cert, old.Cert}, oldUntil: t0.Add(time.Hour)},
	} {
		sec := &corev1.Secret{}
		sec.Annotations = map[string]string{"kept": "yes", AnnotationOldUntil: "stale"}
		if err := st.encode(sec); err != nil {
			t.Fatal(err)
		}
		got, err := decodeState(sec)
		if err != nil {
			t.Fatal(err)
		}
		if !got.active.Cert.Equal(st.active.Cert) || (got.next == nil) != (st.next == nil) ||
			(st.next != nil && !got.next.Cert.Equal(st.next.Cert)) ||
			!got.nextTrustedSince.Equal(st.nextTrustedSince) || !got.oldUntil.Equal(st.oldUntil) ||
			string(got.old.PEM()) != string(mergeBundle(st.old...).PEM()) {
			t.Errorf("round trip of %+v gave %+v", st, got)
		}
		if sec.Annotations["kept"] != "yes" {
			t.Error("encode dropped a foreign annotation")
		}
	}
	if _, err := decodeState(&corev1.Secret{Data: map[string][]byte{SecretKeyCACert: a.CertPEM, SecretKeyCAKey: mustKey(t, b)}}); err == nil {
		t.Error("a Secret whose key is not its CA's decodes")
	}
}

func mustKey(t *testing.T, a *Authority) []byte {
	k, err := a.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func name(a *Authority) string {
	if a == nil {
		return "<none>"
	}
	return a.Cert.Subject.CommonName
}

func names(b Bundle) []string {
	var n []string
	for _, c := range b {
		n = append(n, c.Subject.CommonName)
	}
	return n
}
