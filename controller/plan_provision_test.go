package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPlanProvision: before a driver can exist, an unsealed placeholder is refused, the claims are
// waited for, S and H are made (and planned again on what was made), a refused or taken name is
// told and looked at again, an ended app's S is scaled to 0, and someone's scaling of S undone.
func TestPlanProvision(t *testing.T) {
	now := t0.Add(time.Minute)
	cfg := Config{Seal: testSeal()}
	yes := true
	placeholder := func(sealed, terminal bool) *corev1.Pod {
		p := planPlaceholder(nil)
		p.CreationTimestamp = metav1.NewTime(t0)
		if sealed {
			if err := testSeal().Sign(p, "alice"); err != nil {
				t.Fatal(err)
			}
		}
		if terminal {
			p.Status.Phase = corev1.PodSucceeded
		}
		return p
	}
	sealed, unsealed, ended := placeholder(true, false), placeholder(false, false), placeholder(true, true)
	ownedBy := func(p *corev1.Pod) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: &yes}}
	}
	sts := func(p *corev1.Pod, replicas int32) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "pi-driver", Namespace: "jobs", OwnerReferences: ownedBy(p)},
			Spec: appsv1.StatefulSetSpec{Replicas: &replicas}}
	}
	svc := func(p *corev1.Pod) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "pi-driver-svc", Namespace: "jobs", OwnerReferences: ownedBy(p)}}
	}
	type option func(*Snapshot)
	withOwn := func(replicas int32) option {
		return func(s *Snapshot) {
			s.StatefulSet = reading(sts(s.Placeholder.Value, replicas), FromCache, now)
			s.Service = reading(svc(s.Placeholder.Value), FromCache, now)
		}
	}
	claims := func(c ...driverClaim) option {
		return func(s *Snapshot) { s.Claims = reading(c, FromAPIServer, now) }
	}
	foundLive := func(name string) option { return func(s *Snapshot) { s.Found = reading(name, FromAPIServer, now) } }
	made := func(e ensured) option { return func(s *Snapshot) { s.Ensured = reading(e, FromWrite, now) } }
	live := func(p *corev1.Pod) option {
		return func(s *Snapshot) { s.LivePlaceholder = reading(p, FromAPIServer, now) }
	}
	snapshot := func(p *corev1.Pod, opts ...option) *Snapshot {
		s := &Snapshot{Placeholder: reading(p, FromCache, now)}
		for _, o := range opts {
			o(s)
		}
		return s
	}

	cases := []struct {
		name        string
		s           *Snapshot
		need        []Need
		steps       []string
		ends, again bool
		requeue     time.Duration
		blocked     string // the status written says so
		told        string // the ReplicasCorrected Event says so
	}{
		{name: "unsealed, nothing built yet: refused, and the status says why", s: snapshot(unsealed),
			steps: []string{"writeStatusStep"}, ends: true, blocked: "driverset builds no driver from this pod"},
		{name: "unsealed, with the S it was built with: kept", s: snapshot(unsealed, withOwn(1))},
		{name: "unsealed and ended: nothing said", s: snapshot(placeholder(false, true)), ends: true},
		{name: "no S yet, claims not read: asks for them", s: snapshot(sealed), need: []Need{NeedClaims}},
		{name: "no S yet, a claim missing: waited for, looked at again soon", s: snapshot(sealed, claims(driverClaim{Name: "pi-driver-pvc-0"})),
			steps: []string{"writeStatusStep"}, ends: true, requeue: claimPoll, blocked: "waiting for PersistentVolumeClaim pi-driver-pvc-0"},
		{name: "no S yet, the claims there: S and H made, then planned again", s: snapshot(sealed, claims()),
			steps: []string{"ensureStep"}, again: true},
		{name: "S found only on the apiserver (the cache behind): no claim read or waited for, S and H made (ensure finds them)",
			s: snapshot(sealed, foundLive("renamed-by-another-build")), steps: []string{"ensureStep"}, again: true},
		{name: "made: on to the driver", s: snapshot(sealed, claims(), made(ensured{StatefulSet: sts(sealed, 1)}))},
		{name: "a create refused: told, tried again later", s: snapshot(sealed, claims(), made(ensured{Refused: "driverset cannot create StatefulSet pi-driver: quota"})),
			steps: []string{"writeStatusStep"}, ends: true, requeue: retryRefused, blocked: "quota"},
		{name: "a name taken: looked at again, later the longer it lasts", s: snapshot(sealed, claims(), made(ensured{})),
			ends: true, requeue: waitRequeue(time.Minute)},
		{name: "ended, its S deleted by someone: made again without reading a claim (at 0: replicasFor)", s: snapshot(ended),
			steps: []string{"ensureStep"}, again: true},
		{name: "ended: S scaled to 0", s: snapshot(ended, withOwn(1)), steps: []string{"scaleToZeroStep"}, ends: true},
		{name: "S scaled to 2 by someone: set back to 1, and told", s: snapshot(sealed, withOwn(2)), steps: []string{"setReplicasStep"},
			told: "was scaled to 2 replicas; set back to 1"},
		{name: "S at 0: P is read from the apiserver first", s: snapshot(sealed, withOwn(0)), need: []Need{NeedLivePlaceholder}},
		{name: "S at 0 and P ended on the apiserver (the cache behind): left at 0", s: snapshot(sealed, withOwn(0), live(ended))},
		{name: "S at 0 and P gone from the apiserver: left at 0", s: snapshot(sealed, withOwn(0), live(nil))},
		{name: "S at 0 and P running on the apiserver too: set back to 1", s: snapshot(sealed, withOwn(0), live(sealed)), steps: []string{"setReplicasStep"},
			told: "was scaled to 0 replicas; set back to 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pl := planProvision(c.s, cfg, now)
			if !slices.Equal(pl.Need, c.need) {
				t.Fatalf("needs %v, want %v", pl.Need, c.need)
			}
			for _, st := range pl.Steps {
				switch st := st.(type) {
				case writeStatusStep:
					if !strings.Contains(st.View.Blocked, c.blocked) || c.blocked == "" {
						t.Errorf("status blocked by %q, want %q", st.View.Blocked, c.blocked)
					}
				case setReplicasStep:
					if st.Replicas != 1 || len(st.Then) != 1 || st.Then[0].(eventStep).Reason != "ReplicasCorrected" ||
						!strings.Contains(st.Then[0].(eventStep).Note, c.told) {
						t.Errorf("set replicas %+v, want 1, then ReplicasCorrected told %q", st, c.told)
					}
				}
			}
			if kinds := stepKinds(pl.Steps); !slices.Equal(kinds, c.steps) || pl.Ends != c.ends || pl.Again != c.again || pl.Requeue != c.requeue {
				t.Errorf("steps %v, ends %v, again %v, requeue %s; want %v, %v, %v, %s", kinds, pl.Ends, pl.Again, pl.Requeue, c.steps, c.ends, c.again, c.requeue)
			}
		})
	}
}
