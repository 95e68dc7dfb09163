package harness

import (
	"fmt"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// RenderChart renders the chart at path (its folder, or a packaged archive) with Helm's own
// engine, as `helm install <release> <path> -n <namespace>` would with values: the values schema
// checked, the objects of the files keep accepts, in the files' order.
func RenderChart(path, release, namespace string, values map[string]any, keep func(file string) bool) ([]*unstructured.Unstructured, error) {
	ch, err := loader.Load(path)
	if err != nil {
		return nil, err
	}
	opts := chartutil.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}
	vals, err := chartutil.ToRenderValues(ch, values, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasSuffix(name, ".yaml") && keep(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, name := range names {
		got, err := Decode(strings.NewReader(files[name]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		objs = append(objs, got...)
	}
	return objs, nil
}
