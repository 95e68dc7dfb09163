//go:build testbed

package realrelease

import (
	"fmt"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driverset/driverset/e2e/harness"
)

// helmInstallObjects is what `helm install <release> <archive> -n <namespace>` applies with the
// chart's default values: every rendered object but the hooks (helm test's, and uninstall's,
// which helm install does not run), rendered by Helm's own engine from the packaged archive.
func helmInstallObjects(archive, release, namespace string) ([]*unstructured.Unstructured, error) {
	ch, err := loader.Load(archive)
	if err != nil {
		return nil, err
	}
	opts := chartutil.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}
	vals, err := chartutil.ToRenderValuesWithSchemaValidation(ch, nil, opts, chartutil.DefaultCapabilities, false)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var out []*unstructured.Unstructured
	for _, name := range names {
		objs, err := harness.Decode(strings.NewReader(files[name]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, o := range objs {
			if _, hook := o.GetAnnotations()["helm.sh/hook"]; !hook {
				out = append(out, o)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s renders nothing", archive)
	}
	return out, nil
}
