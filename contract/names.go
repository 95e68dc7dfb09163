package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// MaxStatefulSetName is the longest StatefulSet name driverset makes. The StatefulSet controller
// labels each pod with controller-revision-hash=<name>-<10-char hash>, and a label value has at
// most 63 characters: 63 - 11 = 52.
const MaxStatefulSetName = 52

// Names are the objects driverset makes for one placeholder.
type Names struct {
	// StatefulSet runs the driver; its one pod is StatefulSet + "-0".
	StatefulSet string
	// Service is the headless Service that gives the driver pod its stable DNS name.
	Service string
}

// NamesFor is the one place where driverset names what it creates for the placeholder pod
// called placeholder. The names are deterministic (create-or-get relies on that):
//   - StatefulSet: the placeholder's name, a valid DNS-1123 label of at most 52 characters;
//     a name that is longer or has dots is shortened and suffixed with 64 bits of a SHA-256 of
//     the full name (16 hex digits): finding a second name with the same StatefulSet takes
//     about 2^32 tries for a birthday pair and 2^64 for a given name.
//   - Service: the StatefulSet's name with "-ds" appended, prefixed "ds-" when the name does not
//     start with a letter (a Service name is a DNS-1035 label). Never Spark's own "<x>-driver-svc".
func NamesFor(placeholder string) Names { return namesFor(placeholder, 16) }

// LegacyNamesFor are the names driverset gave before NamesFor's suffix grew from 32 bits (8 hex
// digits) to 64: a placeholder admitted then keeps its StatefulSet under that name for good (the
// controller looks for it), so an upgrade never renames, and never duplicates, a running driver.
// It equals NamesFor for a name that needs no suffix.
func LegacyNamesFor(placeholder string) Names { return namesFor(placeholder, 8) }

// namesFor is NamesFor with a suffix of hexDigits hex digits.
func namesFor(placeholder string, hexDigits int) Names {
	sts := placeholder
	if len(sts) > MaxStatefulSetName || strings.ContainsAny(sts, ".") {
		sum := sha256.Sum256([]byte(placeholder))
		suffix := "-" + hex.EncodeToString(sum[:])[:hexDigits]
		base := strings.ReplaceAll(placeholder, ".", "-")
		if len(base) > MaxStatefulSetName-len(suffix) {
			base = base[:MaxStatefulSetName-len(suffix)]
		}
		sts = strings.TrimRight(base, "-") + suffix
	}
	return NamesOfStatefulSet(sts)
}

// NamesOfStatefulSet are the names that go with the StatefulSet sts (as found in the
// contract.LabelDriver label of its pods and executors).
func NamesOfStatefulSet(sts string) Names {
	svc := sts + "-ds"
	if sts == "" || sts[0] < 'a' || sts[0] > 'z' {
		svc = "ds-" + svc
	}
	return Names{StatefulSet: sts, Service: svc}
}

// DriverPodName is the name of the StatefulSet's one pod. The `executors` webhook entry's
// matchConditions (manifests/base/webhook.yaml, the Helm chart) select executors by this "-0"
// suffix on their controller pod's name; TestForeignExecutorsNeverReachDriverset fails if the two
// part.
func (n Names) DriverPodName() string { return n.StatefulSet + "-0" }

// HeartbeatLease is the name of the Lease that `driverset wrap` renews for the driver pod when
// self-fencing is on: the driver pod's name with "-heartbeat" (a Lease name is a DNS subdomain).
func (n Names) HeartbeatLease() string { return n.DriverPodName() + "-heartbeat" }

// DriverHost is the stable DNS name of the driver in namespace ns: <sts>-0.<svc>.<ns>.svc.
func (n Names) DriverHost(ns string) string {
	return fmt.Sprintf("%s.%s.%s.svc", n.DriverPodName(), n.Service, ns)
}

// CandidateNamesFor are the names driverset has given the objects of the placeholder called
// placeholder, newest first: NamesFor, then LegacyNamesFor when it differs. Only a guess at a
// placeholder's StatefulSet, to be checked against its controller reference: S is the
// StatefulSet the placeholder controls, whatever its name.
func CandidateNamesFor(placeholder string) []Names {
	current, legacy := NamesFor(placeholder), LegacyNamesFor(placeholder)
	if legacy == current {
		return []Names{current}
	}
	return []Names{current, legacy}
}
