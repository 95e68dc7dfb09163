package spark

import (
	"reflect"
	"strings"
	"testing"
)

func TestNameShape(t *testing.T) {
	for name, want := range map[string]string{
		"pi-driver":                              "pi-driver",
		"pi-driver-0":                            "pi-driver-0",
		"pi-3b1c2a190f0d8e21-driver-svc":         "pi-{id}-driver-svc",
		"spark-drv-5e1f0a19b3c2d4e5-conf-map":    "spark-drv-{id}-conf-map",
		"spark-exec-a1b2c319b3c2d4e5-conf-map":   "spark-exec-{id}-conf-map",
		"pi-3b1c2a190f0d8e21-exec-1":             "pi-{id}-exec-{n}",
		"pi-3b1c2a190f0d8e21-exec-12":            "pi-{id}-exec-{n}",
		"spark-0123456789abcdef0123456789abcdef": "{app-id}",
		"":                                       "",
	} {
		if got := NameShape(name); got != want {
			t.Errorf("NameShape(%q) = %q, want %q", name, got, want)
		}
	}
}

// auditLine is one event as the apiserver writes it (only the fields read here).
func auditLine(received, verb, uri, resource, sub, ns, name, pod string) string {
	extra := ""
	if pod != "" {
		extra = `,"extra":{"authentication.kubernetes.io/pod-name":["` + pod + `"]}`
	}
	return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete",` +
		`"requestURI":"` + uri + `","verb":"` + verb + `","user":{"username":"system:serviceaccount:` + ns + `:default"` + extra + `},` +
		`"objectRef":{"resource":"` + resource + `","subresource":"` + sub + `","namespace":"` + ns + `","name":"` + name + `"},` +
		`"requestReceivedTimestamp":"2026-12-01T00:00:` + received + `Z","stageTimestamp":"2026-12-01T00:01:00.000000Z"}`
}

// TestReadCalls: the calls of one namespace, by actor, in the order the apiserver received
// them (not the order the events were written: a watch is written when it ends), repeated
// reads once, repeated writes each.
func TestReadCalls(t *testing.T) {
	log := strings.Join([]string{
		auditLine("01.000000", "create", "/api/v1/namespaces/a/pods", "pods", "", "a", "pi-driver", ""),
		auditLine("04.000000", "create", "/api/v1/namespaces/a/configmaps", "configmaps", "", "a", "spark-exec-a1b2c319b3c2d4e5-conf-map", "pi-driver"),
		auditLine("03.000000", "get", "/api/v1/namespaces/a/pods/pi-driver", "pods", "", "a", "pi-driver", "pi-driver"),
		auditLine("05.000000", "create", "/api/v1/namespaces/a/pods", "pods", "", "a", "pi-3b1c2a190f0d8e21-exec-1", "pi-driver"),
		auditLine("05.100000", "create", "/api/v1/namespaces/a/pods", "pods", "", "a", "pi-3b1c2a190f0d8e21-exec-2", "pi-driver"),
		auditLine("06.000000", "list", "/api/v1/namespaces/a/pods?labelSelector=spark-app-selector%3Dspark-0123456789abcdef0123456789abcdef%2Cspark-role%3Dexecutor", "pods", "", "a", "", "pi-driver"),
		auditLine("07.000000", "list", "/api/v1/namespaces/a/pods?labelSelector=spark-role%3Dexecutor%2Cspark-app-selector%3Dspark-0123456789abcdef0123456789abcdef", "pods", "", "a", "", "pi-driver"),
		// The watch: received second, written last.
		auditLine("02.000000", "watch", "/api/v1/namespaces/a/pods?fieldSelector=metadata.name%3Dpi-driver&watch=true", "pods", "", "a", "pi-driver", ""),
		auditLine("08.000000", "create", "/api/v1/namespaces/b/pods", "pods", "", "b", "other", ""),
	}, "\n")
	got, err := ReadCalls(strings.NewReader(log), InNamespace("a"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]Call{
		ActorSubmit: {
			{Actor: ActorSubmit, Verb: "create", Resource: "pods", Name: "pi-driver"},
			{Actor: ActorSubmit, Verb: "watch", Resource: "pods", Name: "pi-driver", Selector: "metadata.name"},
		},
		"pi-driver": {
			{Actor: "pi-driver", Verb: "get", Resource: "pods", Name: "pi-driver"},
			{Actor: "pi-driver", Verb: "create", Resource: "configmaps", Name: "spark-exec-{id}-conf-map"},
			{Actor: "pi-driver", Verb: "create", Resource: "pods", Name: "pi-{id}-exec-{n}"},
			{Actor: "pi-driver", Verb: "create", Resource: "pods", Name: "pi-{id}-exec-{n}"},
			{Actor: "pi-driver", Verb: "list", Resource: "pods", Selector: "spark-app-selector,spark-role"},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	if _, err := ReadCalls(strings.NewReader("{not json"), InNamespace("a")); err == nil {
		t.Error("a broken line was accepted")
	}
}

func TestCallString(t *testing.T) {
	c := Call{Actor: "pi-driver", Verb: "deletecollection", Resource: "pods", Selector: "spark-app-selector,spark-role"}
	if got, want := c.String(), "deletecollection pods [spark-app-selector,spark-role]"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	c = Call{Verb: "get", Resource: "pods", Subresource: "status", Name: "pi-driver"}
	if got, want := c.String(), "get pods/status pi-driver"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// TestPodCreates: the mutating webhooks called for each pod create, as the apiserver annotates its
// audit event (a call that failed open too), and none for a create no webhook matched; other
// verbs and namespaces are left out.
func TestPodCreates(t *testing.T) {
	annotated := func(line, annotations string) string {
		return strings.TrimSuffix(line, "}") + `,"annotations":{` + annotations + `}}`
	}
	call := func(i int, webhook string) string {
		return `"mutation.webhook.admission.k8s.io/round_0_index_` + string(rune('0'+i)) +
			`":"{\"configuration\":\"driverset\",\"webhook\":\"` + webhook + `\",\"mutated\":true}"`
	}
	log := strings.Join([]string{
		annotated(auditLine("01.000000", "create", "/api/v1/namespaces/a/pods", "pods", "", "a", "pi-driver", ""),
			call(0, "drivers.driverset.dev")+`,"pod-security.kubernetes.io/enforce-policy":"privileged:latest"`),
		auditLine("02.000000", "create", "/api/v1/namespaces/a/pods", "pods", "", "a", "pi-3b1c2a190f0d8e21-exec-1", "pi-driver-0"),
		annotated(auditLine("03.000000", "create", "/api/v1/namespaces/a/pods", "pods", "", "a", "pi-3b1c2a190f0d8e21-exec-2", "pi-driver-0"),
			call(2, "executors.driverset.dev")+","+call(1, "sidecar.example.com")),
		annotated(auditLine("04.000000", "create", "/api/v1/namespaces/a/pods", "pods", "", "a", "pi-3b1c2a190f0d8e21-exec-3", "pi-driver-0"),
			`"failed-open.mutation.webhook.admission.k8s.io/round_0_index_2":"executors.driverset.dev"`),
		annotated(auditLine("05.000000", "patch", "/api/v1/namespaces/a/pods/pi-driver/status", "pods", "status", "a", "pi-driver", ""),
			call(0, "drivers.driverset.dev")),
		annotated(auditLine("06.000000", "create", "/api/v1/namespaces/b/pods", "pods", "", "b", "other", ""), call(0, "drivers.driverset.dev")),
	}, "\n")
	got, err := PodCreates(strings.NewReader(log), InNamespace("a"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"pi-driver":                  {"drivers.driverset.dev"},
		"pi-3b1c2a190f0d8e21-exec-1": {},
		"pi-3b1c2a190f0d8e21-exec-2": {"executors.driverset.dev", "sidecar.example.com"},
		"pi-3b1c2a190f0d8e21-exec-3": {"executors.driverset.dev"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PodCreates = %v, want %v", got, want)
	}
}
