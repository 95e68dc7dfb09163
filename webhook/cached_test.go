package webhook

import (
	"context"
	"errors"
	"k8s.io/utils/ptr"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/driverset/driverset/contract"
)

func loadPod(t testing.TB, path string) *corev1.Pod {
	t.Helper()
	y, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := &corev1.Pod{}
	if err := yaml.UnmarshalStrict(y, p); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

var errCacheDown = errors.New("informer cache is not synced")

// failing makes every Get of a pod named name (every Get, when name is "") and every List fail.
func failing(name string) func(*fake.ClientBuilder) {
	return func(b *fake.ClientBuilder) {
		b.WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if name == "" || key.Name == name {
					return errCacheDown
				}
				return c.Get(ctx, key, obj, opts...)
			},
			List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
				return errCacheDown
			},
		})
	}
}

// withPods adds pods to the cache.
func withPods(pods ...*corev1.Pod) func(*fake.ClientBuilder) {
	return func(b *fake.ClientBuilder) {
		for _, p := range pods {
			b.WithObjects(p)
		}
	}
}

type verdict int

const (
	unchanged  verdict = iota // allowed, no patch
	patchedOK                 // allowed, with a patch
	refusedErr                // not allowed, an error code
	denied                    // not allowed, a denial (403)
)

// legacyPlaceholder is long enough for NamesFor to shorten it, so its 32-bit and 64-bit names differ.
const legacyPlaceholder = "clickstream-sessionization-to-lakehouse-checkpointed-driver"

// TestExecutorDecides covers what the golden cases do not: lookups that fail (never a refusal),
// and owners that only look like a driverset driver.
func TestExecutorDecides(t *testing.T) {
	cache := filepath.Join("testdata", "executor", "cache.yaml")
	byPlaceholder := func() *corev1.Pod {
		return loadPod(t, filepath.Join("testdata", "executor", "spark-3.5-owned-by-placeholder.pod.yaml"))
	}
	cases := []struct {
		name    string
		nilRead bool
		cache   []func(*fake.ClientBuilder)
		pod     func(*corev1.Pod)
		want    verdict
		message string // part of the result's message
		warning string // part of the one warning; "" = no warning
	}{
		{name: "the control: pointed at S-0", want: patchedOK, message: "pointed at driver pod spark-pi-8e3c5a1f0b7d2e49-driver-0"},
		{name: "the cache fails on the owner: allowed unchanged, warned", cache: []func(*fake.ClientBuilder){failing("")},
			want: unchanged, message: "could not be looked up", warning: errCacheDown.Error()},
		{name: "the cache fails on S-0: allowed unchanged, warned", cache: []func(*fake.ClientBuilder){failing("spark-pi-8e3c5a1f0b7d2e49-driver-0")},
			want: unchanged, message: "pod spark-pi-8e3c5a1f0b7d2e49-driver-0, the driver of placeholder spark-pi-8e3c5a1f0b7d2e49-driver, could not be looked up",
			warning: errCacheDown.Error()},
		{name: "no cache at all: allowed unchanged, warned", nilRead: true, want: unchanged, warning: "no cache reader"},
		{name: "not an executor", pod: func(p *corev1.Pod) { p.Labels[contract.LabelSparkRole] = contract.RoleDriver },
			want: unchanged, message: "not a Spark executor pod"},
		{name: "no spark-role", pod: func(p *corev1.Pod) { delete(p.Labels, contract.LabelSparkRole) },
			want: unchanged, message: "not a Spark executor pod"},
		{name: "the driver label, even empty", pod: func(p *corev1.Pod) { p.Labels[contract.LabelDriver] = "" },
			want: unchanged, message: "already run by driverset"},
		{name: "controlled by a ReplicaSet", pod: func(p *corev1.Pod) {
			p.OwnerReferences[0].APIVersion, p.OwnerReferences[0].Kind = "apps/v1", "ReplicaSet"
		}, want: unchanged, message: "not owned by a driver pod"},
		{name: "controlled by a v1 kind that is no Pod", pod: func(p *corev1.Pod) { p.OwnerReferences[0].Kind = "ReplicationController" },
			want: unchanged, message: "not owned by a driver pod"},
		{name: "controlled by a Pod of another API group", pod: func(p *corev1.Pod) { p.OwnerReferences[0].APIVersion = "example.com/v1" },
			want: unchanged, message: "not owned by a driver pod"},
		{name: "a non-controller reference to the placeholder is no owner", pod: func(p *corev1.Pod) { p.OwnerReferences[0].Controller = nil },
			want: unchanged, message: "not owned by a driver pod"},
		{name: "owned by a driverset executor, not a driver", pod: func(p *corev1.Pod) {
			p.OwnerReferences[0].Name, p.OwnerReferences[0].UID = "spark-pi-8e3c5a1f0b7d2e49-exec-7", "uid-exec-7"
		}, cache: []func(*fake.ClientBuilder){withPods(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: "spark-pi-8e3c5a1f0b7d2e49-exec-7", Namespace: "analytics", UID: "uid-exec-7",
			Labels: map[string]string{contract.LabelDriver: "spark-pi-8e3c5a1f0b7d2e49-driver", contract.LabelSparkRole: contract.RoleExecutor},
		}})}, want: unchanged, message: "is not run by driverset"},
		{name: "a placeholder label with another value is no placeholder", pod: func(p *corev1.Pod) {
			p.OwnerReferences[0].Name, p.OwnerReferences[0].UID = "odd-driver", "uid-odd"
		}, cache: []func(*fake.ClientBuilder){withPods(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: "odd-driver", Namespace: "analytics", UID: "uid-odd",
			Labels: map[string]string{contract.LabelPlaceholder: "yes", contract.LabelSparkRole: contract.RoleDriver},
		}})}, want: unchanged, message: "is not run by driverset"},
		{name: "the placeholder's <name>-0 is not driverset's driver pod", pod: func(p *corev1.Pod) {
			p.OwnerReferences[0].Name, p.OwnerReferences[0].UID = "twin-driver", "uid-twin"
		}, cache: []func(*fake.ClientBuilder){withPods(
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "twin-driver", Namespace: "analytics", UID: "uid-twin",
				Labels: map[string]string{contract.LabelPlaceholder: "true", contract.LabelSparkRole: contract.RoleDriver}}},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "twin-driver-0", Namespace: "analytics", UID: "uid-twin-0",
				Labels: map[string]string{contract.LabelDriver: "someone-else", contract.LabelSparkRole: contract.RoleDriver}}},
		), withStatefulSets(statefulSetOf("twin-driver", "uid-twin-s", "twin-driver", "uid-twin"))},
			want: unchanged, message: "pod twin-driver-0 is not the driver pod of placeholder twin-driver"},
		{name: "a placeholder admitted with the 32-bit name: its S-0 of that name", pod: func(p *corev1.Pod) {
			p.OwnerReferences[0].Name, p.OwnerReferences[0].UID = legacyPlaceholder, "uid-legacy"
		}, cache: []func(*fake.ClientBuilder){withPods(
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: legacyPlaceholder, Namespace: "analytics", UID: "uid-legacy",
				Labels: map[string]string{contract.LabelPlaceholder: "true", contract.LabelSparkRole: contract.RoleDriver}}},
			driverPodOf(contract.LegacyNamesFor(legacyPlaceholder).StatefulSet, "uid-legacy-s"),
		), withStatefulSets(statefulSetOf(contract.LegacyNamesFor(legacyPlaceholder).StatefulSet, "uid-legacy-s", legacyPlaceholder, "uid-legacy"))},
			want: patchedOK, message: "pointed at driver pod " + contract.LegacyNamesFor(legacyPlaceholder).DriverPodName()},
		// S is the StatefulSet the placeholder controls, whatever its name: a name this build
		// computes is only a guess, checked against the controller reference (issue 34).
		{name: "S under a third name (a rollback across a naming change): its S-0, found by S's controller reference", pod: func(p *corev1.Pod) {
			p.OwnerReferences[0].Name, p.OwnerReferences[0].UID = "rolled-back-driver", "uid-rolled-back"
		}, cache: []func(*fake.ClientBuilder){withPods(
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rolled-back-driver", Namespace: "analytics", UID: "uid-rolled-back",
				Labels: map[string]string{contract.LabelPlaceholder: "true", contract.LabelSparkRole: contract.RoleDriver}}},
			driverPodOf("renamed-by-another-build", "uid-renamed-s"),
		), withStatefulSets(statefulSetOf("renamed-by-another-build", "uid-renamed-s", "rolled-back-driver", "uid-rolled-back"))},
			want: patchedOK, message: "pointed at driver pod renamed-by-another-build-0"},
		{name: "the S of this build's name is an earlier placeholder's (same name, another UID): no driver yet", pod: func(p *corev1.Pod) {
			p.OwnerReferences[0].Name, p.OwnerReferences[0].UID = "again-driver", "uid-again-2"
		}, cache: []func(*fake.ClientBuilder){withPods(
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "again-driver", Namespace: "analytics", UID: "uid-again-2",
				Labels: map[string]string{contract.LabelPlaceholder: "true", contract.LabelSparkRole: contract.RoleDriver}}},
			driverPodOf("again-driver", "uid-again-s1"),
		), withStatefulSets(statefulSetOf("again-driver", "uid-again-s1", "again-driver", "uid-again-1"))},
			want: unchanged, message: "placeholder again-driver has no StatefulSet"},
		{name: "S-0 of S's name is an earlier S's (another UID): not the driver pod", pod: func(p *corev1.Pod) {
			p.OwnerReferences[0].Name, p.OwnerReferences[0].UID = "stale-driver", "uid-stale"
		}, cache: []func(*fake.ClientBuilder){withPods(
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stale-driver", Namespace: "analytics", UID: "uid-stale",
				Labels: map[string]string{contract.LabelPlaceholder: "true", contract.LabelSparkRole: contract.RoleDriver}}},
			driverPodOf("stale-driver", "uid-stale-s-earlier"),
		), withStatefulSets(statefulSetOf("stale-driver", "uid-stale-s", "stale-driver", "uid-stale"))},
			want: unchanged, message: "pod stale-driver-0 is not the driver pod of placeholder stale-driver"},
		{name: "listing the StatefulSets fails: allowed unchanged, warned", pod: func(p *corev1.Pod) {
			p.OwnerReferences[0].Name, p.OwnerReferences[0].UID = "rolled-back-driver", "uid-rolled-back"
		}, cache: []func(*fake.ClientBuilder){withPods(
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rolled-back-driver", Namespace: "analytics", UID: "uid-rolled-back",
				Labels: map[string]string{contract.LabelPlaceholder: "true", contract.LabelSparkRole: contract.RoleDriver}}},
		), failing("no pod of this name")},
			want: unchanged, message: "could not be looked up", warning: errCacheDown.Error()},
		{name: "S-0 in the cache without a UID: convert refuses, allowed unchanged, warned", pod: func(p *corev1.Pod) {
			p.OwnerReferences[0].Name, p.OwnerReferences[0].UID = "nouid-driver", "uid-nouid"
		}, cache: []func(*fake.ClientBuilder){withPods(
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nouid-driver", Namespace: "analytics", UID: "uid-nouid",
				Labels: map[string]string{contract.LabelPlaceholder: "true", contract.LabelSparkRole: contract.RoleDriver}}},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nouid-driver-0", Namespace: "analytics",
				Labels:          map[string]string{contract.LabelDriver: "nouid-driver", contract.LabelSparkRole: contract.RoleDriver},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "nouid-driver", UID: "uid-nouid-s", Controller: ptr.To(true)}}}},
		), withStatefulSets(statefulSetOf("nouid-driver", "uid-nouid-s", "nouid-driver", "uid-nouid"))}, want: unchanged, message: "left as Spark made it", warning: "is not persisted"},
		{name: "an unparsable URL: tied to S-0, the URL left, warned", pod: func(p *corev1.Pod) {
			for i, e := range p.Spec.Containers[0].Env {
				if e.Name == contract.EnvDriverURL {
					p.Spec.Containers[0].Env[i].Value = "driver-svc:7078"
				}
			}
		}, want: patchedOK, message: "owned by driver pod spark-pi-8e3c5a1f0b7d2e49-driver-0", warning: `"driver-svc:7078" is not spark://`},
		{name: "the namespace comes from the request when the pod has none", pod: func(p *corev1.Pod) { p.Namespace = "" },
			want: patchedOK, message: "analytics.svc"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := byPlaceholder()
			req := createRequest(encode(t, pod), false) // the request keeps the namespace
			if tc.pod != nil {
				tc.pod(pod)
				req.Object.Raw = encode(t, pod)
			}
			x := &Executor{}
			if !tc.nilRead {
				x.Reader = cacheFrom(t, cache, tc.cache...)
			}
			resp := x.Handle(context.Background(), req)
			checkVerdict(t, resp, tc.want, tc.message)
			checkWarning(t, resp, tc.warning)
		})
	}
}

// TestIncarnationDecides: the cases around the golden ones. The cache failing refuses the pod
// (its webhook fails closed; the StatefulSet controller retries).
func TestIncarnationDecides(t *testing.T) {
	cache := filepath.Join("testdata", "incarnation", "cache.yaml")
	cases := []struct {
		name    string
		nilRead bool
		cache   []func(*fake.ClientBuilder)
		pod     func(*corev1.Pod)
		want    verdict
		message string
	}{
		{name: "the control: held", want: patchedOK, message: "held by scheduling gate driverset.dev/stale-executors"},
		{name: "the cache fails: refused, to be retried", cache: []func(*fake.ClientBuilder){failing("")},
			want: refusedErr, message: errCacheDown.Error()},
		{name: "listing the executors fails: refused, to be retried", cache: []func(*fake.ClientBuilder){failing("no pod of this name")},
			want: refusedErr, message: "could not look up the executors of StatefulSet spark-pi-8e3c5a1f0b7d2e49-driver: " + errCacheDown.Error()},
		{name: "no cache: refused, to be retried", nilRead: true, want: refusedErr, message: "no cache"},
		{name: "an executor pod", pod: func(p *corev1.Pod) { p.Labels[contract.LabelSparkRole] = contract.RoleExecutor },
			want: unchanged, message: "not a Spark driver pod"},
		{name: "the driver label empty", pod: func(p *corev1.Pod) { p.Labels[contract.LabelDriver] = "" },
			want: unchanged, message: "not a driver pod run by driverset"},
		{name: "no app id: held all the same, executors are found by their StatefulSet", pod: func(p *corev1.Pod) { delete(p.Labels, contract.LabelSparkAppSelector) },
			want: patchedOK, message: "held by scheduling gate"},
		{name: "an earlier incarnation's executor, with that incarnation's app id: held", pod: func(p *corev1.Pod) {
			p.Labels[contract.LabelDriver] = "stream-driver"
			p.Labels[contract.LabelSparkAppSelector] = "spark-0a1b2c3d4e5f4a6b8c7d9e0f1a2b3c4d"
		}, cache: []func(*fake.ClientBuilder){withPods(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: "stream-exec-1", Namespace: "analytics",
			Labels: map[string]string{contract.LabelDriver: "stream-driver", contract.LabelSparkRole: contract.RoleExecutor,
				contract.LabelSparkAppSelector: "spark-0a1b2c3d4e5f4a6b8c7d9e0f1a2b3c4d-5d1f0c8e"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "stream-driver-0", UID: "uid-earlier", Controller: ptr.To(true)}},
		}})}, want: patchedOK, message: "held by scheduling gate"},
		// Spark's StatefulSet allocator (issue 34): the executor's controller is the set
		// spark-s-<app id>-<profile>, named by one of the app's incarnation ids, not a driver pod.
		{name: "an earlier incarnation's executor under Spark's StatefulSet allocator: held", pod: func(p *corev1.Pod) {
			p.Labels[contract.LabelDriver] = "quiet-driver"
			p.Labels[contract.LabelSparkAppSelector] = "spark-0a1b2c3d4e5f4a6b8c7d9e0f1a2b3c4d"
		}, cache: []func(*fake.ClientBuilder){withPods(setExecutor("spark-s-spark-0a1b2c3d4e5f4a6b8c7d9e0f1a-5d1f0c8e-0"))},
			want: patchedOK, message: "held by scheduling gate"},
		{name: "another app's executor under Spark's StatefulSet allocator, labelled for this app: admitted", pod: func(p *corev1.Pod) {
			p.Labels[contract.LabelDriver] = "quiet-driver"
			p.Labels[contract.LabelSparkAppSelector] = "spark-0a1b2c3d4e5f4a6b8c7d9e0f1a2b3c4d"
		}, cache: []func(*fake.ClientBuilder){withPods(setExecutor("spark-s-spark-99999999999999999999999999-5d1f0c8e-0"))},
			want: unchanged, message: "no executors"},
		// The label is self-declared: a pod that carries it but is controlled by no driver pod of
		// this app is not its executor (convert.ExecutorOfApp), and holds nothing.
		{name: "labelled for this app, controlled by a tenant's pod: admitted", pod: func(p *corev1.Pod) {
			p.Labels[contract.LabelDriver] = "quiet-driver"
		}, cache: []func(*fake.ClientBuilder){withPods(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: "squatter", Namespace: "analytics",
			Labels:          map[string]string{contract.LabelDriver: "quiet-driver", contract.LabelSparkRole: contract.RoleExecutor},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "tenant-web-7f9c", UID: "uid-tenant", Controller: ptr.To(true)}},
		}})}, want: unchanged, message: "no executors"},
		{name: "labelled for this app, controlled by another app's executor: admitted", pod: func(p *corev1.Pod) {
			p.Labels[contract.LabelDriver] = "quiet-driver"
		}, cache: []func(*fake.ClientBuilder){withPods(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: "other-exec-9", Namespace: "analytics",
			Labels:          map[string]string{contract.LabelDriver: "quiet-driver", contract.LabelSparkRole: contract.RoleExecutor},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "other-exec-1", UID: "uid-other-exec", Controller: ptr.To(true)}},
		}})}, want: unchanged, message: "no executors"},
		{name: "labelled for this app, controlled by no pod at all: admitted", pod: func(p *corev1.Pod) {
			p.Labels[contract.LabelDriver] = "quiet-driver"
		}, cache: []func(*fake.ClientBuilder){withPods(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: "orphan-exec", Namespace: "analytics",
			Labels: map[string]string{contract.LabelDriver: "quiet-driver", contract.LabelSparkRole: contract.RoleExecutor},
		}})}, want: unchanged, message: "no executors"},
		// Spark's own reference to the placeholder (a driver that names the placeholder as its
		// pod): the placeholder's UID is read from S's controller reference, as the controller has it.
		// (The pod names quiet-driver, whose executors are not in the cache, so that only the
		// placeholder's reference can hold it; its controller is still S.)
		{name: "controlled by the placeholder (through S), labelled for another app: held", pod: func(p *corev1.Pod) {
			p.Labels[contract.LabelDriver] = "quiet-driver"
		}, cache: []func(*fake.ClientBuilder){withStatefulSet(placeholderSts), withPods(placeholderExecutor("stream-v1-driver"))},
			want: patchedOK, message: "held by scheduling gate"},
		{name: "S read from the cache fails: refused, to be retried", cache: []func(*fake.ClientBuilder){withStatefulSet(placeholderSts), failing("spark-pi-8e3c5a1f0b7d2e49-driver")},
			want: refusedErr, message: "could not read StatefulSet spark-pi-8e3c5a1f0b7d2e49-driver, whose placeholder decides which executors are the app's: " + errCacheDown.Error()},
		{name: "S of the name has another UID: the placeholder is not known, its reference holds nothing", cache: []func(*fake.ClientBuilder){
			withStatefulSet(func() *appsv1.StatefulSet { s := placeholderSts(); s.UID = "uid-another-s"; return s }), withPods(placeholderExecutor("stream-v1-driver"))},
			pod: func(p *corev1.Pod) { p.Labels[contract.LabelDriver] = "quiet-driver" }, want: unchanged, message: "no executors"},
		// Only a placeholder, a v1 Pod, controls S: any other controller (or none) names no
		// placeholder, and Spark's reference to that UID holds nothing.
		{name: "S controlled by nothing: the placeholder is not known, its reference holds nothing", cache: []func(*fake.ClientBuilder){
			withStatefulSet(func() *appsv1.StatefulSet { s := placeholderSts(); s.OwnerReferences = nil; return s }), withPods(placeholderExecutor("stream-v1-driver"))},
			pod: func(p *corev1.Pod) { p.Labels[contract.LabelDriver] = "quiet-driver" }, want: unchanged, message: "no executors"},
		{name: "S controlled by a Pod of another API group: its reference holds nothing", cache: []func(*fake.ClientBuilder){
			withStatefulSet(func() *appsv1.StatefulSet {
				s := placeholderSts()
				s.OwnerReferences[0].APIVersion = "example.com/v1"
				return s
			}), withPods(placeholderExecutor("stream-v1-driver"))},
			pod: func(p *corev1.Pod) { p.Labels[contract.LabelDriver] = "quiet-driver" }, want: unchanged, message: "no executors"},
		// A DStream app submitted again under another name onto an old checkpoint: Spark restores
		// the executor labels from the checkpoint (Checkpoint.createSparkConf reloads the driver's
		// pod name, not them), so an earlier incarnation's executors are labelled for the app that
		// wrote it, and controlled by this app's driver pod name.
		{name: "a resubmitted DStream's executor, labelled for the checkpoint's app, owned by S-0's name: held", pod: func(p *corev1.Pod) {
			p.Labels[contract.LabelDriver] = "stream-v2-driver"
		}, cache: []func(*fake.ClientBuilder){withPods(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: "stream-exec-1", Namespace: "analytics",
			Labels: map[string]string{contract.LabelDriver: "stream-v1-driver", contract.LabelSparkRole: contract.RoleExecutor,
				contract.LabelSparkAppSelector: "spark-checkpointed"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "stream-v2-driver-0", UID: "uid-earlier", Controller: ptr.To(true)}},
		}})}, want: patchedOK, message: "held by scheduling gate"},
		{name: "another app's executor, owned by a pod of S-0's name but not its controller: admitted", pod: func(p *corev1.Pod) {
			p.Labels[contract.LabelDriver] = "stream-v2-driver"
		}, cache: []func(*fake.ClientBuilder){withPods(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: "stream-exec-1", Namespace: "analytics",
			Labels:          map[string]string{contract.LabelDriver: "stream-v1-driver", contract.LabelSparkRole: contract.RoleExecutor},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "stream-v2-driver-0", UID: "uid-earlier"}},
		}})}, want: unchanged, message: "no executors"},
		{name: "another StatefulSet's executors only: admitted", pod: func(p *corev1.Pod) { p.Labels[contract.LabelDriver] = "quiet-driver" },
			want: unchanged, message: "no executors"},
		{name: "already held (a reinvocation): nothing more", pod: func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: contract.GateStaleExecutors}}
		}, want: unchanged, message: "held by scheduling gate"},
		{name: "bound to a node: cannot be held, admitted", pod: func(p *corev1.Pod) { p.Spec.NodeName = "node-1" },
			want: unchanged, message: "bound to node node-1, so it cannot be held"},
		{name: "the namespace comes from the request when the pod has none", pod: func(p *corev1.Pod) { p.Namespace = "" },
			want: patchedOK, message: "held by scheduling gate"},
		{name: "ordinal 0: the driver", pod: func(p *corev1.Pod) { p.Labels[appsv1.PodIndexLabel] = "0" },
			want: patchedOK, message: "held by scheduling gate"},
		{name: "ordinal 1 (the StatefulSet scaled up by hand): a second driver, denied", pod: func(p *corev1.Pod) {
			p.Labels[appsv1.PodIndexLabel] = "1"
			p.Name = strings.TrimSuffix(p.Name, "-0") + "-1"
		}, want: denied, message: "one driver per app"},
		{name: "ordinal 1 without executors to wait for: still denied", pod: func(p *corev1.Pod) {
			p.Labels[appsv1.PodIndexLabel] = "1"
			delete(p.Labels, contract.LabelSparkAppSelector)
		}, want: denied, message: "one driver per app"},
		{name: "no ordinal label (not a StatefulSet's pod): held as usual", pod: func(p *corev1.Pod) { delete(p.Labels, appsv1.PodIndexLabel) },
			want: patchedOK, message: "held by scheduling gate"},
		{name: "ordinal 1 of a driver driverset does not run: left alone", pod: func(p *corev1.Pod) {
			p.Labels[appsv1.PodIndexLabel] = "1"
			p.Labels[contract.LabelDriver] = ""
		}, want: unchanged, message: "not a driver pod run by driverset"},
		{name: "ordinal 1 of an executor: left alone", pod: func(p *corev1.Pod) {
			p.Labels[appsv1.PodIndexLabel] = "1"
			p.Labels[contract.LabelSparkRole] = contract.RoleExecutor
		}, want: unchanged, message: "not a Spark driver pod"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := loadPod(t, filepath.Join("testdata", "incarnation", "spark-3.5-stale-executors.pod.yaml"))
			req := createRequest(encode(t, pod), false)
			if tc.pod != nil {
				tc.pod(pod)
				req.Object.Raw = encode(t, pod)
			}
			n := &Incarnation{}
			if !tc.nilRead {
				n.Reader = cacheFrom(t, cache, tc.cache...)
			}
			checkVerdict(t, n.Handle(context.Background(), req), tc.want, tc.message)
		})
	}
}

// placeholderSts is S of the golden pod spark-3.5-stale-executors, controlled by its placeholder
// (testdata/incarnation/cache.yaml).
func placeholderSts() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "spark-pi-8e3c5a1f0b7d2e49-driver", Namespace: "analytics",
		UID: "1d2e3f4a-5b6c-4d7e-8f9a-0b1c2d3e4f5a", Labels: map[string]string{contract.LabelDriver: "spark-pi-8e3c5a1f0b7d2e49-driver"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "spark-pi-8e3c5a1f0b7d2e49-driver",
			UID: "6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f", Controller: ptr.To(true)}}}}
}

// placeholderExecutor is an executor controlled by that placeholder (Spark's own reference),
// labelled for StatefulSet sts.
func placeholderExecutor(sts string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-exec-1", Namespace: "analytics",
		Labels: map[string]string{contract.LabelDriver: sts, contract.LabelSparkRole: contract.RoleExecutor},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "spark-pi-8e3c5a1f0b7d2e49-driver",
			UID: "6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f", Controller: ptr.To(true)}}}}
}

func withStatefulSet(s func() *appsv1.StatefulSet) func(*fake.ClientBuilder) {
	return func(b *fake.ClientBuilder) { b.WithObjects(s()) }
}

// withStatefulSets adds StatefulSets to the cache.
func withStatefulSets(sets ...*appsv1.StatefulSet) func(*fake.ClientBuilder) {
	return func(b *fake.ClientBuilder) {
		for _, s := range sets {
			b.WithObjects(s)
		}
	}
}

// statefulSetOf is driverset's StatefulSet name (UID uid) in "analytics", controlled by the
// placeholder owner (UID ownerUID).
func statefulSetOf(name string, uid types.UID, owner string, ownerUID types.UID) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "analytics", UID: uid,
		Labels:          map[string]string{contract.LabelDriver: name},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: owner, UID: ownerUID, Controller: ptr.To(true)}}}}
}

// driverPodOf is S-0 of StatefulSet sts as the StatefulSet controller makes it, controlled by the
// StatefulSet of that name with UID stsUID.
func driverPodOf(sts string, stsUID types.UID) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: sts + "-0", Namespace: "analytics", UID: types.UID(sts + "-0-uid"),
		Labels:          map[string]string{contract.LabelDriver: sts, contract.LabelSparkRole: contract.RoleDriver},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts, UID: stsUID, Controller: ptr.To(true)}}}}
}

// TestHoldIncarnation is the incarnation decision alone: the gate once, whenever an executor of
// the app exists, whatever state it is in.
func TestHoldIncarnation(t *testing.T) {
	exec := func(name string, mutate func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if mutate != nil {
			mutate(&p)
		}
		return p
	}
	now := metav1.Now()
	cases := []struct {
		name      string
		gates     []string // the pod's gates before
		nodeName  string
		executors []corev1.Pod
		wantGates []string
		message   string
	}{
		{name: "no executors: not held", message: "no executors of an earlier incarnation"},
		{name: "one running executor: held", executors: []corev1.Pod{exec("pi-exec-1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning })},
			wantGates: []string{contract.GateStaleExecutors}, message: "1 executor pod(s) of an earlier incarnation still exist (pi-exec-1)"},
		{name: "a failed executor counts: the new driver would see it as a failure",
			executors: []corev1.Pod{exec("pi-exec-2", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })},
			wantGates: []string{contract.GateStaleExecutors}, message: "(pi-exec-2)"},
		{name: "a terminating executor counts: it still exists",
			executors: []corev1.Pod{exec("pi-exec-3", func(p *corev1.Pod) { p.DeletionTimestamp = &now })},
			wantGates: []string{contract.GateStaleExecutors}, message: "(pi-exec-3)"},
		{name: "many executors: a few named, sorted, the rest counted",
			executors: []corev1.Pod{exec("pi-exec-5", nil), exec("pi-exec-1", nil), exec("pi-exec-4", nil), exec("pi-exec-2", nil), exec("pi-exec-3", nil)},
			wantGates: []string{contract.GateStaleExecutors}, message: "5 executor pod(s) of an earlier incarnation still exist (pi-exec-1, pi-exec-2, pi-exec-3 and 2 more)"},
		{name: "three executors: all named, nothing more counted",
			executors: []corev1.Pod{exec("pi-exec-3", nil), exec("pi-exec-1", nil), exec("pi-exec-2", nil)},
			wantGates: []string{contract.GateStaleExecutors}, message: "3 executor pod(s) of an earlier incarnation still exist (pi-exec-1, pi-exec-2, pi-exec-3)"},
		{name: "already held: the gate once", gates: []string{contract.GateStaleExecutors}, executors: []corev1.Pod{exec("pi-exec-1", nil)},
			wantGates: []string{contract.GateStaleExecutors}, message: "held by scheduling gate"},
		{name: "held, executors gone meanwhile: the gate stays for the controller to lift", gates: []string{contract.GateStaleExecutors},
			wantGates: []string{contract.GateStaleExecutors}, message: "already held"},
		{name: "another gate stays first", gates: []string{"example.com/other"}, executors: []corev1.Pod{exec("pi-exec-1", nil)},
			wantGates: []string{"example.com/other", contract.GateStaleExecutors}, message: "held"},
		{name: "bound to a node: cannot take a gate", nodeName: "node-1", executors: []corev1.Pod{exec("pi-exec-1", nil)},
			message: "bound to node node-1, so it cannot be held although 1 executor pod(s)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{NodeName: tc.nodeName}}
			for _, g := range tc.gates {
				pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
			}
			msg := HoldIncarnation(pod, Leftovers{Executors: tc.executors})
			var got []string
			for _, g := range pod.Spec.SchedulingGates {
				got = append(got, g.Name)
			}
			if strings.Join(got, ",") != strings.Join(tc.wantGates, ",") {
				t.Errorf("gates %v, want %v", got, tc.wantGates)
			}
			if !strings.Contains(msg, tc.message) {
				t.Errorf("message %q, want one containing %q", msg, tc.message)
			}
			if again := HoldIncarnation(pod, Leftovers{Executors: tc.executors}); again != msg || len(pod.Spec.SchedulingGates) != len(got) {
				t.Errorf("second call: %q with gates %v, want %q and no new gate", again, pod.Spec.SchedulingGates, msg)
			}
		})
	}
}

// TestCachedHandlersRequests: requests that are not a well-formed pod CREATE get a proper answer
// from both handlers, never a panic and never a lookup.
func TestCachedHandlersRequests(t *testing.T) {
	handlers := map[string]func(client.Reader) admission.Handler{
		"executor":    func(r client.Reader) admission.Handler { return &Executor{Reader: r} },
		"incarnation": func(r client.Reader) admission.Handler { return &Incarnation{Reader: r} },
	}
	goodPods := map[string]string{
		"executor":    filepath.Join("testdata", "executor", "spark-3.5-owned-by-placeholder.pod.yaml"),
		"incarnation": filepath.Join("testdata", "incarnation", "spark-3.5-stale-executors.pod.yaml"),
	}
	cases := []struct {
		name    string
		req     func(r admission.Request) admission.Request
		allowed bool
		code    int32
		message string
		// badPod: the pod cannot be decoded. The incarnation handler answers 400; the executor
		// handler allows it unchanged with a warning, since an executor is never refused.
		badPod bool
	}{
		{name: "DELETE", req: func(r admission.Request) admission.Request {
			r.Operation, r.OldObject, r.Object = admissionv1.Delete, r.Object, runtime.RawExtension{}
			return r
		}, allowed: true, code: http.StatusOK, message: "on CREATE only, not on DELETE"},
		{name: "UPDATE", req: func(r admission.Request) admission.Request {
			r.Operation = admissionv1.Update
			return r
		}, allowed: true, code: http.StatusOK, message: "not on UPDATE"},
		{name: "wrong kind", req: func(r admission.Request) admission.Request {
			r.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
			r.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}
			return r
		}, allowed: true, code: http.StatusOK, message: "v1 Pods only, not /v1, Kind=ConfigMap configmaps"},
		{name: "pod subresource", req: func(r admission.Request) admission.Request {
			r.SubResource = "ephemeralcontainers"
			return r
		}, allowed: true, code: http.StatusOK, message: "pods/ephemeralcontainers"},
		{name: "no object", req: func(r admission.Request) admission.Request {
			r.Object = runtime.RawExtension{}
			return r
		}, allowed: true, code: http.StatusOK, message: "no pod"},
		{name: "malformed JSON", req: func(r admission.Request) admission.Request {
			r.Object.Raw = []byte(`{"metadata": {"labels": ["not", "a", "map"]}}`)
			return r
		}, badPod: true},
		{name: "truncated JSON", req: func(r admission.Request) admission.Request {
			r.Object.Raw = r.Object.Raw[:len(r.Object.Raw)/2]
			return r
		}, badPod: true},
		{name: "not JSON at all", req: func(r admission.Request) admission.Request {
			r.Object.Raw = []byte("\x00\x01protobuf?")
			return r
		}, badPod: true},
	}
	for hname, handler := range handlers {
		good := readPodJSON(t, goodPods[hname])
		for _, tc := range cases {
			t.Run(hname+"/"+tc.name, func(t *testing.T) {
				// A cache that fails every lookup: none may happen before the request is understood.
				h := handler(cacheFrom(t, filepath.Join("testdata", hname, "cache.yaml"), failing("")))
				resp := h.Handle(context.Background(), tc.req(createRequest(good, false)))
				allowed, code, message, warning := tc.allowed, tc.code, tc.message, ""
				switch {
				case tc.badPod && hname == "executor":
					allowed, code, message, warning = true, http.StatusOK, "left as Spark made it", "could not decode the pod"
				case tc.badPod:
					code, message = http.StatusBadRequest, "could not decode the pod"
				}
				if resp.Allowed != allowed || resp.Result == nil || resp.Result.Code != code ||
					!strings.Contains(resp.Result.Message, message) || len(resp.Patches) != 0 {
					t.Errorf("got allowed=%v result=%+v patches=%v, want allowed=%v code %d message containing %q",
						resp.Allowed, resp.Result, resp.Patches, allowed, code, message)
				}
				checkWarning(t, resp, warning)
			})
		}
	}
}

func checkVerdict(t *testing.T, resp admission.Response, want verdict, message string) {
	t.Helper()
	if resp.Result == nil || !strings.Contains(resp.Result.Message, message) {
		t.Errorf("result %+v, want a message containing %q", resp.Result, message)
	}
	switch want {
	case unchanged:
		if !resp.Allowed || len(resp.Patches) != 0 || resp.PatchType != nil {
			t.Errorf("allowed=%v patches=%v, want allowed unchanged", resp.Allowed, resp.Patches)
		}
	case patchedOK:
		if !resp.Allowed || len(resp.Patches) == 0 {
			t.Errorf("allowed=%v patches=%v, want allowed with a patch", resp.Allowed, resp.Patches)
		}
	case refusedErr:
		if resp.Allowed || len(resp.Patches) != 0 || resp.Result == nil || resp.Result.Code != http.StatusInternalServerError {
			t.Errorf("allowed=%v result=%+v, want refused with 500", resp.Allowed, resp.Result)
		}
	case denied:
		if resp.Allowed || len(resp.Patches) != 0 || resp.Result == nil || resp.Result.Code != http.StatusForbidden {
			t.Errorf("allowed=%v result=%+v, want denied with 403", resp.Allowed, resp.Result)
		}
	}
}

func checkWarning(t *testing.T, resp admission.Response, warning string) {
	t.Helper()
	if warning == "" {
		if len(resp.Warnings) != 0 {
			t.Errorf("warnings %v, want none", resp.Warnings)
		}
		return
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], warning) {
		t.Errorf("warnings %v, want one containing %q", resp.Warnings, warning)
	}
}

// setExecutor is pod <set>-0 of Spark's executor StatefulSet set, labelled for quiet-driver's app.
func setExecutor(set string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: set + "-0", Namespace: "analytics",
		Labels:          map[string]string{contract.LabelDriver: "quiet-driver", contract.LabelSparkRole: contract.RoleExecutor},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: set, UID: "uid-set", Controller: ptr.To(true)}},
	}}
}
