package testbed

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// stage is the part of a kwok Stage these tests look at.
type stage struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		ResourceRef struct {
			Kind string `json:"kind"`
		} `json:"resourceRef"`
		Next struct {
			StatusTemplate string `json:"statusTemplate"`
			Delete         bool   `json:"delete"`
		} `json:"next"`
	} `json:"spec"`
}

func loadStages(t *testing.T) map[string]stage {
	t.Helper()
	path := t.TempDir() + "/stages.yaml"
	if err := writeStages(path); err != nil {
		t.Fatal(err)
	}
	data, err := readFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]stage{}
	for _, doc := range strings.Split(data, "\n---\n") {
		if strings.TrimSpace(strings.TrimPrefix(doc, "---")) == "" {
			continue
		}
		var s stage
		if err := yaml.Unmarshal([]byte(strings.TrimPrefix(doc, "---\n")), &s); err != nil {
			t.Fatalf("stage does not parse: %v\n%s", err, doc)
		}
		if s.Kind != "Stage" {
			t.Fatalf("kind %q in %s", s.Kind, doc)
		}
		out[s.Metadata.Name] = s
	}
	return out
}

// kwokFuncs imitates the template functions kwok gives stages, with fixed values.
func kwokFuncs() template.FuncMap {
	return template.FuncMap{
		"Now":         func() string { return "2026-01-01T00:00:00Z" },
		"Version":     func() string { return "v0.8.0" },
		"NodeIP":      func() string { return "10.243.0.1" },
		"NodeIPsWith": func(string) []string { return []string{"10.243.0.1"} },
		"PodIPsWith":  func(string, bool, string, string, string) []string { return []string{"10.244.1.5"} },
		"NodeConditions": func() []map[string]any {
			return []map[string]any{{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}}
		},
		"Quote": func(v any) string {
			b, _ := json.Marshal(v)
			if len(b) > 0 && b[0] != '"' {
				b, _ = json.Marshal(string(b))
			}
			return string(b)
		},
		"YAML": func(v any, indent ...int) (string, error) {
			b, err := yaml.Marshal(v)
			pad := strings.Repeat("  ", indent[0])
			return strings.ReplaceAll("\n"+string(b), "\n", "\n"+pad), err
		},
	}
}

// render runs a stage's statusTemplate on obj, as kwok does, and decodes the result into out.
func render(t *testing.T, s stage, obj any, out any) {
	t.Helper()
	tmpl, err := template.New(s.Metadata.Name).Funcs(kwokFuncs()).Parse(s.Spec.Next.StatusTemplate)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(obj)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, m); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(buf.Bytes(), out); err != nil {
		t.Fatalf("rendered status is not YAML: %v\n%s", err, buf.String())
	}
}

func TestStages(t *testing.T) {
	stages := loadStages(t)
	want := map[string]string{
		"testbed-node-ready": "Node", "testbed-node-heartbeat": "Node",
		"testbed-pod-ready": "Pod", "testbed-pod-stop": "Pod", "testbed-pod-delete": "Pod",
	}
	for name, kind := range want {
		if got := stages[name].Spec.ResourceRef.Kind; got != kind {
			t.Errorf("stage %s: resource %q, want %q", name, got, kind)
		}
	}
	if len(stages) != len(want) {
		t.Errorf("stages %v, want exactly %v", stages, want)
	}
	if !stages["testbed-pod-delete"].Spec.Next.Delete {
		t.Error("pod-delete does not delete")
	}

	t.Run("node ready keeps the registered capacity", func(t *testing.T) {
		var st corev1.NodeStatus
		render(t, stages["testbed-node-ready"], newNodeObject("n1", 1), &st)
		if NodeReady(&corev1.Node{Status: st}) != corev1.ConditionTrue || st.Phase != corev1.NodeRunning {
			t.Errorf("not Ready/Running: %+v", st)
		}
		if got := st.Allocatable[corev1.ResourceCPU]; got.String() != "32" {
			t.Errorf("allocatable cpu %s", got.String())
		}
		if len(st.Addresses) != 2 || st.Addresses[1].Address != "n1" {
			t.Errorf("addresses %+v", st.Addresses)
		}
	})

	t.Run("node ready without capacity falls back to a roomy node", func(t *testing.T) {
		var st corev1.NodeStatus
		render(t, stages["testbed-node-ready"], &corev1.Node{}, &st)
		if got := st.Allocatable[corev1.ResourcePods]; got.String() != "110" {
			t.Errorf("allocatable pods %s", got.String())
		}
	})

	t.Run("pod ready runs every container and completes init containers", func(t *testing.T) {
		pod := &corev1.Pod{Spec: corev1.PodSpec{
			NodeName:       "n1",
			InitContainers: []corev1.Container{{Name: "copy", Image: "i"}},
			Containers:     []corev1.Container{{Name: "a", Image: "i"}, {Name: "b", Image: "i"}},
		}}
		var st corev1.PodStatus
		render(t, stages["testbed-pod-ready"], pod, &st)
		if st.Phase != corev1.PodRunning || st.PodIP != "10.244.1.5" || st.HostIP != "10.243.0.1" {
			t.Errorf("phase %s podIP %s hostIP %s", st.Phase, st.PodIP, st.HostIP)
		}
		if len(st.ContainerStatuses) != 2 || st.ContainerStatuses[1].State.Running == nil || !st.ContainerStatuses[1].Ready {
			t.Errorf("containers %+v", st.ContainerStatuses)
		}
		if len(st.InitContainerStatuses) != 1 || st.InitContainerStatuses[0].State.Terminated == nil ||
			st.InitContainerStatuses[0].State.Terminated.Reason != "Completed" {
			t.Errorf("init containers %+v", st.InitContainerStatuses)
		}
	})

	// A deleted pod is reported terminal before it is removed, as a kubelet does: a running
	// container ends with the JVM's 143, one that had ended keeps its end.
	t.Run("pod stop reports the pod terminal", func(t *testing.T) {
		pod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "a", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
			{Name: "b", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3}}},
		}}}
		var st corev1.PodStatus
		render(t, stages["testbed-pod-stop"], pod, &st)
		if st.Phase != corev1.PodFailed {
			t.Errorf("phase %s, want Failed", st.Phase)
		}
		if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].Name != "a" ||
			st.ContainerStatuses[0].State.Terminated == nil || st.ContainerStatuses[0].State.Terminated.ExitCode != 143 {
			t.Errorf("containers %+v, want only a, terminated with 143", st.ContainerStatuses)
		}
	})
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}
