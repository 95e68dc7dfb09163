package spark

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// Call is one API call from an apiserver audit event, reduced to what a client chose to do:
// who, which verb on which resource, the shape of the object's name and of its selectors.
// Two runs of the same submission make the same Calls although every generated name differs.
type Call struct {
	// Actor is the client: "submit" for a token bound to no pod (spark-submit, run from the
	// host), else the name shape of the pod whose ServiceAccount token made the call (the
	// driver, an executor).
	Actor       string
	Verb        string // get, list, watch, create, update, patch, delete, deletecollection
	Resource    string // pods, configmaps, services, …
	Subresource string // status, log, … or ""
	Name        string // NameShape of the object's name; "" for a collection
	// Selector lists the label and field selector keys of a list, watch or deletecollection,
	// sorted ("metadata.name", "spark-app-selector,spark-role"): which objects, not which values.
	Selector string
}

func (c Call) String() string {
	s := c.Verb + " " + c.Resource
	if c.Subresource != "" {
		s += "/" + c.Subresource
	}
	if c.Name != "" {
		s += " " + c.Name
	}
	if c.Selector != "" {
		s += " [" + c.Selector + "]"
	}
	return s
}

// ActorSubmit is the actor of calls made with a token bound to no pod: spark-submit's.
const ActorSubmit = "submit"

// podNameExtra is where the apiserver names the pod a bound ServiceAccount token belongs to.
const podNameExtra = "authentication.kubernetes.io/pod-name"

// Generated name parts, replaced by placeholders (see NameShape).
var ( //nolint:gochecknoglobals // constant patterns
	appIDPart = regexp.MustCompile(`spark-[0-9a-f]{32}`)
	// KubernetesUtils.uniqueID (6 hex digits of randomness, then the clock in hex), and the
	// 16-digit hex of 2.4's prefixes.
	idPart    = regexp.MustCompile(`[0-9a-f]{10,}`)
	indexPart = regexp.MustCompile(`-exec-[0-9]+$`)
)

// NameShape is name with its generated parts replaced: the app id by {app-id}, a generated hex
// id by {id}, an executor's index by {n}. "pi-3b1c2a190f0d8e21-exec-2" is "pi-{id}-exec-{n}".
func NameShape(name string) string {
	name = appIDPart.ReplaceAllString(name, "{app-id}")
	name = idPart.ReplaceAllString(name, "{id}")
	return indexPart.ReplaceAllString(name, "-exec-{n}")
}

// CallOf reduces one audit event to a Call.
func CallOf(ev *auditv1.Event) Call {
	c := Call{Actor: ActorSubmit, Verb: ev.Verb}
	if pod := ev.User.Extra[podNameExtra]; len(pod) > 0 {
		c.Actor = NameShape(pod[0])
	}
	if ref := ev.ObjectRef; ref != nil {
		c.Resource, c.Subresource, c.Name = ref.Resource, ref.Subresource, NameShape(ref.Name)
	}
	c.Selector = selectorKeys(ev.RequestURI)
	return c
}

// selectorKeys are the keys of a request's label and field selectors, sorted.
func selectorKeys(requestURI string) string {
	u, err := url.Parse(requestURI)
	if err != nil {
		return ""
	}
	var keys []string
	q := u.Query()
	if s, err := labels.Parse(q.Get("labelSelector")); err == nil {
		reqs, _ := s.Requirements()
		for _, r := range reqs {
			keys = append(keys, r.Key())
		}
	}
	if s, err := fields.ParseSelector(q.Get("fieldSelector")); err == nil {
		for _, r := range s.Requirements() {
			keys = append(keys, r.Field)
		}
	}
	slices.Sort(keys)
	return strings.Join(slices.Compact(keys), ",")
}

// ReadCalls reads an audit log (JSON lines) and returns the calls of the events keep accepts,
// by actor, each actor's in the order the apiserver received them. A run of identical
// consecutive reads is one call: how often a client polls depends on how long it ran.
func ReadCalls(r io.Reader, keep func(*auditv1.Event) bool) (map[string][]Call, error) {
	events, err := readEvents(r, keep)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(events, func(a, b *auditv1.Event) int {
		return cmp.Compare(a.RequestReceivedTimestamp.UnixNano(), b.RequestReceivedTimestamp.UnixNano())
	})
	calls := map[string][]Call{}
	for _, ev := range events {
		c := CallOf(ev)
		if n := len(calls[c.Actor]); n > 0 && calls[c.Actor][n-1] == c && reads[c.Verb] {
			continue
		}
		calls[c.Actor] = append(calls[c.Actor], c)
	}
	return calls, nil
}

// readEvents reads an audit log (JSON lines) and returns the events keep accepts, in the log's order.
func readEvents(r io.Reader, keep func(*auditv1.Event) bool) ([]*auditv1.Event, error) {
	var events []*auditv1.Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		ev := &auditv1.Event{}
		if err := json.Unmarshal(sc.Bytes(), ev); err != nil {
			return nil, fmt.Errorf("spark: audit log: %w", err)
		}
		if keep(ev) {
			events = append(events, ev)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("spark: audit log: %w", err)
	}
	return events, nil
}

// mutationAnnotation is the prefix of the audit annotations in which the apiserver names each
// mutating webhook it called for a request (round_<r>_index_<i>; a JSON value with the webhook's
// name), at Metadata level; "failed-open." + it names one whose call failed and was ignored.
const mutationAnnotation = "mutation.webhook.admission.k8s.io/"

// PodCreates reads an audit log and returns, by pod name, the mutating webhooks the apiserver
// called for each pod create keep accepts (none: an empty list), failed-open calls included.
func PodCreates(r io.Reader, keep func(*auditv1.Event) bool) (map[string][]string, error) {
	events, err := readEvents(r, func(ev *auditv1.Event) bool {
		ref := ev.ObjectRef
		return ev.Verb == "create" && ref != nil && ref.Resource == "pods" && ref.Subresource == "" && keep(ev)
	})
	if err != nil {
		return nil, err
	}
	creates := map[string][]string{}
	for _, ev := range events {
		called := []string{}
		for k, v := range ev.Annotations {
			switch {
			case strings.HasPrefix(k, mutationAnnotation):
				var m struct{ Webhook string }
				if err := json.Unmarshal([]byte(v), &m); err != nil {
					return nil, fmt.Errorf("spark: audit annotation %s=%q: %w", k, v, err)
				}
				called = append(called, m.Webhook)
			case strings.HasPrefix(k, "failed-open."+mutationAnnotation):
				called = append(called, v)
			}
		}
		slices.Sort(called)
		creates[ev.ObjectRef.Name] = called
	}
	return creates, nil
}

// reads are the verbs that change nothing.
var reads = map[string]bool{"get": true, "list": true, "watch": true} //nolint:gochecknoglobals // constant set

// InNamespace keeps the events of one namespace's objects.
func InNamespace(ns string) func(*auditv1.Event) bool {
	return func(ev *auditv1.Event) bool { return ev.ObjectRef != nil && ev.ObjectRef.Namespace == ns }
}
