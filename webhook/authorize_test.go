package webhook

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/driverset/driverset/convert"
)

// TestExtendedResources is the spec of what needs a grant: every resource but cpu, memory,
// ephemeral-storage and hugepages-*, in requests or limits, of any container or the pod level.
func TestExtendedResources(t *testing.T) {
	q := resource.MustParse("1")
	tests := []struct {
		name     string
		recorded convert.ContainerResources
		want     []string
	}{
		{name: "nothing recorded"},
		{name: "native only", recorded: convert.ContainerResources{"driver": {
			Requests: corev1.ResourceList{"cpu": q, "memory": q, "ephemeral-storage": q, "hugepages-2Mi": q},
			Limits:   corev1.ResourceList{"hugepages-1Gi": q},
		}}},
		{name: "a GPU in limits only", recorded: convert.ContainerResources{"driver": {
			Limits: corev1.ResourceList{"memory": q, "nvidia.com/gpu": q},
		}}, want: []string{"nvidia.com/gpu"}},
		{name: "several, across containers and the pod level, each once", recorded: convert.ContainerResources{
			"driver":            {Requests: corev1.ResourceList{"nvidia.com/gpu": q, "example.com/fpga": q}, Limits: corev1.ResourceList{"nvidia.com/gpu": q}},
			"sidecar":           {Requests: corev1.ResourceList{"rdma/hca": q}},
			convert.PodLevelKey: {Limits: corev1.ResourceList{"example.com/fpga": q}},
		}, want: []string{"example.com/fpga", "nvidia.com/gpu", "rdma/hca"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExtendedResources(tc.recorded); !reflect.DeepEqual(got, tc.want) && len(got)+len(tc.want) != 0 {
				t.Fatalf("ExtendedResources = %v, want %v", got, tc.want)
			}
		})
	}
}

// grants is an Authorizer from a table: user -> namespace -> resources it may use.
type grants struct {
	may   map[string]map[string][]string
	err   error
	asked []string
}

func (g *grants) MayUse(_ context.Context, user authenticationv1.UserInfo, ns, name string) (bool, string, error) {
	g.asked = append(g.asked, user.Username+" "+ns+" "+name)
	if g.err != nil {
		return false, "", g.err
	}
	for _, r := range g.may[user.Username][ns] {
		if r == name {
			return true, "", nil
		}
	}
	return false, "no RBAC policy matched", nil
}

// TestDriverAuthorizesExtendedResources is the spec of the handler's decision with Authorize set:
// a driver asking for an extended resource is converted only when its requester has the grant for
// each, in the pod's namespace; the check is made again on re-invocation; without Authorize, or
// for native resources only, nothing is asked.
func TestDriverAuthorizesExtendedResources(t *testing.T) {
	gpu := func(p *corev1.Pod) {
		one := resource.MustParse("1")
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": one}
	}
	ml := map[string]map[string][]string{"ana": {"jobs": {"nvidia.com/gpu"}}}
	tests := []struct {
		name     string
		edit     func(*corev1.Pod)
		user     string
		grants   *grants // nil: no Authorize
		want     string  // "" converted; else the refusal says it
		wantAsks int
	}{
		{name: "no authorizer: anyone's GPU driver is converted", edit: gpu, user: "bob"},
		{name: "native resources only: nothing asked", user: "bob", grants: &grants{}},
		{name: "a GPU, and the grant", edit: gpu, user: "ana", grants: &grants{may: ml}, wantAsks: 2},
		{name: "a GPU, no grant", edit: gpu, user: "bob", grants: &grants{may: ml}, wantAsks: 1,
			want: `it asks for nvidia.com/gpu, and "bob" may not "use" it here (no grant of verb "use" on resource extendedresources.driverset.dev, resourceName "nvidia.com/gpu", in namespace "jobs"): no RBAC policy matched`},
		{name: "a GPU, the grant in another namespace only", edit: gpu, user: "ana",
			grants: &grants{may: map[string]map[string][]string{"ana": {"other": {"nvidia.com/gpu"}}}}, wantAsks: 1, want: `"ana" may not "use" it here`},
		{name: "the authorizer fails: refused", edit: gpu, user: "ana", grants: &grants{err: errors.New("apiserver down")}, wantAsks: 1,
			want: "could not ask the apiserver"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := sparkDriver()
			if tc.edit != nil {
				tc.edit(pod)
			}
			d := &Driver{Seal: testSeal()}
			if tc.grants != nil {
				d.Authorize = tc.grants
			}
			raw := encode(t, pod)
			as := func(raw []byte) admission.Request {
				req := createRequest(raw, false)
				req.UserInfo = authenticationv1.UserInfo{Username: tc.user}
				return req
			}
			first := d.Handle(context.Background(), as(raw))
			switch {
			case tc.want == "" && (!first.Allowed || len(first.Patches) == 0):
				t.Fatalf("not converted: %+v", first.Result)
			case tc.want != "" && (first.Allowed || !strings.Contains(first.Result.Message, tc.want)):
				t.Fatalf("answered allowed=%v %+v, want refused saying %q", first.Allowed, first.Result, tc.want)
			}
			if tc.want == "" {
				// Its own placeholder, seen again on re-invocation: asked again, still allowed.
				again := d.Handle(context.Background(), as(applyPatch(t, raw, first.Patches)))
				if !again.Allowed || len(again.Patches) != 0 {
					t.Fatalf("re-invoked: allowed=%v patches=%v %+v", again.Allowed, again.Patches, again.Result)
				}
			}
			if tc.grants != nil && len(tc.grants.asked) != tc.wantAsks {
				t.Fatalf("asked %v, want %d questions", tc.grants.asked, tc.wantAsks)
			}
		})
	}
}
