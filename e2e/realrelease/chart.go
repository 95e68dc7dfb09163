//go:build testbed

package realrelease

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driverset/driverset/e2e/harness"
)

// helmInstallObjects is what `helm install <release> <archive> -n <namespace>` applies with the
// chart's default values: every rendered object but the hooks (helm test's, and uninstall's,
// which helm install does not run), rendered by Helm's own engine from the packaged archive.
func helmInstallObjects(archive, release, namespace string) ([]*unstructured.Unstructured, error) {
	objs, err := harness.RenderChart(archive, release, namespace, nil, func(string) bool { return true })
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if _, hook := o.GetAnnotations()["helm.sh/hook"]; !hook {
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s renders nothing", archive)
	}
	return out, nil
}
