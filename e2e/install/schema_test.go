//go:build testbed

package install

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// values.schema.json keeps step with values.yaml: every value the chart offers is described, so a
// value added without its schema (and so without validation) fails here. A schema object without
// "properties" (resources, affinity, a securityContext) takes any Kubernetes content.
func TestChartSchemaCoversEveryValue(t *testing.T) {
	dir := filepath.Join(moduleRoot(t), "charts", "driverset")
	var values, schema map[string]any
	for file, into := range map[string]*map[string]any{"values.yaml": &values, "values.schema.json": &schema} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if file == "values.yaml" {
			err = yaml.Unmarshal(data, into)
		} else {
			err = json.Unmarshal(data, into)
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	var walk func(path string, v, s map[string]any)
	walk = func(path string, v, s map[string]any) {
		props, ok := s["properties"].(map[string]any)
		if !ok {
			return
		}
		for k, sub := range v {
			ps, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("values.schema.json does not describe %s%s", path, k)
				continue
			}
			if m, ok := sub.(map[string]any); ok {
				walk(path+k+".", m, ps)
			}
		}
	}
	walk("", values, schema)
}

// freeForm are the values whose content is Kubernetes' own (a container's resources, a pod's
// securityContext or affinity, labels and annotations): the schema cannot list their keys, so
// they alone may be objects without "additionalProperties": false.
var freeForm = map[string]bool{
	"global": true, "resources": true, "podSecurityContext": true, "securityContext": true,
	"nodeSelector": true, "affinity": true, "podAnnotations": true, "commonLabels": true,
	"metrics.serviceMonitor.labels": true, "metrics.prometheusRule.labels": true,
	"topologySpreadConstraints[]": true,
	"networkPolicy.webhookFrom[]": true, "networkPolicy.metricsFrom[]": true,
	"metrics.serviceMonitor.tlsConfig": true, "metrics.podMonitor.labels": true, "metrics.podMonitor.tlsConfig": true,
}

// The schema is strict: every object of the chart's own values refuses keys it does not describe,
// so a typo (`--set replica=3`, `metrics.serviceMonitor.enable`) fails the install instead of
// being ignored. Objects that hold Kubernetes content are listed in freeForm.
func TestChartSchemaIsStrict(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "charts", "driverset", "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, s map[string]any)
	walk = func(path string, s map[string]any) {
		if items, ok := s["items"].(map[string]any); ok {
			walk(path+"[]", items)
		}
		isObject := s["type"] == "object" || s["properties"] != nil
		if types, ok := s["type"].([]any); ok {
			for _, ty := range types {
				isObject = isObject || ty == "object"
			}
		}
		if !isObject {
			return
		}
		name := path
		if name == "" {
			name = "(the top level)"
		}
		if freeForm[path] {
			if s["properties"] != nil {
				t.Errorf("%s is free-form in this test but the schema describes its keys: make it strict", name)
			}
			return
		}
		if s["additionalProperties"] != false {
			t.Errorf("%s: additionalProperties is %v, want false", name, s["additionalProperties"])
		}
		props, _ := s["properties"].(map[string]any)
		for k, sub := range props {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if m, ok := sub.(map[string]any); ok {
				walk(p, m)
			}
		}
	}
	walk("", schema)
}
