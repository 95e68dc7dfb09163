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
