package webhook

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/driverset/driverset/convert"
)

// The grant a requester needs, with --authorize-extended-resources, for each extended resource its
// driver asks for: verb "use" on extendedresources.driverset.dev, the resource's name as the
// resourceName, in the pod's namespace (docs/install.md#who-may-ask-for-gpus).
const (
	GrantGroup    = "driverset.dev"
	GrantResource = "extendedresources"
	GrantVerb     = "use"
)

// authorizeTimeout bounds one SubjectAccessReview: the apiserver answers in milliseconds, and the
// webhook's own timeout is 10 s.
const authorizeTimeout = 5 * time.Second

// Authorizer answers whether user may use the extended resource name in namespace: allowed, or
// the authorizer's reason why not.
type Authorizer interface {
	MayUse(ctx context.Context, user authenticationv1.UserInfo, namespace, name string) (bool, string, error)
}

// ExtendedResources are the resources of recorded that are not native compute resources (cpu,
// memory, ephemeral-storage, hugepages-*), sorted: what S-0 gets from the placeholder's annotation
// that vanilla Kubernetes hands out to whoever may create the pod, and that a cluster may want to
// hand out only to some (GPUs, FPGAs, RDMA devices). Both requests and limits count.
func ExtendedResources(recorded convert.ContainerResources) []string {
	seen := map[string]bool{}
	for _, r := range recorded {
		for _, list := range []corev1.ResourceList{r.Requests, r.Limits} {
			for name := range list {
				if !native(name) {
					seen[string(name)] = true
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func native(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return true
	}
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// unauthorized says which extended resource of pod, a placeholder, its requester may not use, and
// which grant is missing; "" when it may use them all (or none is asked for). An error is the
// authorizer's: the pod is then refused, as the apiserver would refuse what it cannot decide.
func unauthorized(ctx context.Context, a Authorizer, user authenticationv1.UserInfo, pod *corev1.Pod) (string, error) {
	recorded, err := convert.RealResources(pod)
	if err != nil {
		return "", err
	}
	for _, name := range ExtendedResources(recorded) {
		ok, why, err := a.MayUse(ctx, user, pod.Namespace, name)
		if err != nil {
			return "", fmt.Errorf("driverset could not ask the apiserver whether %q may use %s: %w", user.Username, name, err)
		}
		if !ok {
			msg := fmt.Sprintf("driverset does not run this driver: it asks for %s, and %q may not %q it here "+
				"(no grant of verb %q on resource %s.%s, resourceName %q, in namespace %q)",
				name, user.Username, GrantVerb, GrantVerb, GrantResource, GrantGroup, name, pod.Namespace)
			if why != "" {
				msg += ": " + why
			}
			return msg, nil
		}
	}
	return "", nil
}

// SubjectAccessReviews is the Authorizer that asks the apiserver, as the requester of the pod
// create (its user, groups, uid and extra, from the AdmissionReview).
type SubjectAccessReviews struct {
	Client authorizationclient.SubjectAccessReviewInterface
}

// MayUse implements Authorizer.
func (s SubjectAccessReviews) MayUse(ctx context.Context, user authenticationv1.UserInfo, namespace, name string) (bool, string, error) {
	ctx, cancel := context.WithTimeout(ctx, authorizeTimeout)
	defer cancel()
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, Groups: user.Groups, UID: user.UID, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: GrantVerb, Group: GrantGroup, Resource: GrantResource, Name: name,
		},
	}}
	got, err := s.Client.Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, "", err
	}
	return got.Status.Allowed && !got.Status.Denied, got.Status.Reason, nil
}
