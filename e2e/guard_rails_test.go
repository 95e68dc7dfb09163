//go:build testbed

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/driverset/driverset/certs"
	"github.com/driverset/driverset/contract"
)

// asDriverset is a client acting as driverset's ServiceAccount: a stolen token, or a replica an
// attacker controls, with exactly the install's RBAC.
func asDriverset(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(bed.cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:driverset-system:driverset",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:driverset-system", "system:authenticated"},
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Issue 11, guard rails: driverset's ServiceAccount holds cluster-wide rights to create
// StatefulSets and Services and to patch and delete pods, and (self-managed TLS) to patch its
// webhook configuration. The install's ValidatingAdmissionPolicies refuse every use of them that
// is not driverset's own; RBAC alone allows each one. Every action is a server-side dry run (the
// policies judge dry runs the same way), so nothing is harmed if one is let through.
func TestDriversetServiceAccountIsFencedByPolicies(t *testing.T) {
	ctx := context.Background()
	applySelfManagedRBAC(t) // the caBundle patch right, as a self-managed install grants it
	ns := namespace(t, nil)
	r := startApp(t, app(ns, "guarded"), 0)
	placeholder := r.sub.plan.DriverPodName
	// A pod that is none of driverset's business, held by someone else's gate and by the gate
	// driverset lifts from a new incarnation.
	plain, err := kube().CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			Containers:      []corev1.Container{{Name: "web", Image: "nginx"}},
			SchedulingGates: []corev1.PodSchedulingGate{{Name: "example.com/hold"}, {Name: contract.GateStaleExecutors}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds := asDriverset(t)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	dryPatch := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}
	yes := true
	owned := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: placeholder, UID: getPod(t, ns, placeholder).UID, Controller: &yes}}
	sts := func(ns string, owners []metav1.OwnerReference) *appsv1.StatefulSet {
		labels := map[string]string{"app": "x"}
		return &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns, OwnerReferences: owners},
			Spec: appsv1.StatefulSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "attacker/miner"}}},
				},
			},
		}
	}
	svc := func(ns string, owners []metav1.OwnerReference) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns, OwnerReferences: owners},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}
	}
	// A StatefulSet and a claim of the tenant's own, none of driverset's business.
	mine := sts(ns, nil)
	mine.Name = "theirs"
	mine.Spec.Replicas = new(int32(0))
	theirs, err := kube().AppsV1().StatefulSets(ns).Create(ctx, mine, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A system StatefulSet, labelled as driverset's: kube-system is not served, whatever it carries.
	system := sts(metav1.NamespaceSystem, nil)
	system.Name = "guard-" + ns
	system.Labels = map[string]string{contract.LabelDriver: system.Name}
	system.Spec.Replicas = new(int32(0))
	if _, err := kube().AppsV1().StatefulSets(metav1.NamespaceSystem).Create(ctx, system, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube().AppsV1().StatefulSets(metav1.NamespaceSystem).Delete(context.Background(), system.Name, metav1.DeleteOptions{})
	})
	claim, err := kube().CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: map[string]string{contract.LabelSparkAppSelector: "spark-1"}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// driverset's own StatefulSet and Service for the app, as it made them, to be created again
	// (changed or not) as a dry run.
	fresh, freshSvc := madeByDriverset(t, ns, r.names)
	createSts := func(change func(*appsv1.StatefulSet)) func(context.Context) error {
		return func(ctx context.Context) error {
			s := fresh()
			change(s)
			_, err := ds.AppsV1().StatefulSets(ns).Create(ctx, s, dry)
			return err
		}
	}
	createSvc := func(change func(*corev1.Service)) func(context.Context) error {
		return func(ctx context.Context) error {
			s := freshSvc()
			change(s)
			_, err := ds.CoreV1().Services(ns).Create(ctx, s, dry)
			return err
		}
	}
	// An Event as driverset records one about its placeholder; change makes it something else.
	// What names another pod is refused first by the webhook entry events.driverset.dev, which
	// reads the pod (TestDriversetTokenRecordsEventsOnlyAboutItsOwn); the policy after it.
	createEvent := func(ns string, change func(*eventsv1.Event)) func(context.Context) error {
		return func(ctx context.Context) error {
			e := &eventsv1.Event{
				ObjectMeta:          metav1.ObjectMeta{Name: placeholder + ".guard", Namespace: ns},
				EventTime:           metav1.NowMicro(),
				ReportingController: "driverset.dev/controller",
				ReportingInstance:   "driverset.dev/controller-driverset-0",
				Action:              "Converted",
				Reason:              "Converted",
				Type:                corev1.EventTypeNormal,
				Note:                "guard rails",
				Regarding:           corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: placeholder, UID: owned[0].UID},
			}
			change(e)
			_, err := ds.EventsV1().Events(ns).Create(ctx, e, dry)
			return err
		}
	}
	asIs := func(*appsv1.StatefulSet) {}
	patchSts := func(name, patch string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := ds.AppsV1().StatefulSets(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), dryPatch)
			return err
		}
	}
	patchClaim := func(patch string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := ds.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, claim.Name, types.MergePatchType, []byte(patch), dryPatch)
			return err
		}
	}
	patchPod := func(ns, name, patch string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := ds.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), dryPatch)
			return err
		}
	}
	// A labelled StatefulSet or Service in a served namespace is first seen by the webhook entry
	// creates.driverset.dev (mutating admission runs before validating), which refuses anything
	// but what driverset builds (TestDriversetTokenCreatesOnlyWhatItBuilds); the policy
	// driverset-guard-creates checks the same shape after it, enforced by the apiserver itself.
	const creates = "creates.driverset.dev"
	refused := []struct {
		name, policy string
		do           func(context.Context) error
	}{
		{"a StatefulSet that no placeholder owns", "driverset-guard-creates", func(ctx context.Context) error {
			_, err := ds.AppsV1().StatefulSets(ns).Create(ctx, sts(ns, nil), dry)
			return err
		}},
		{"a StatefulSet in kube-system", "driverset-guard-creates", func(ctx context.Context) error {
			_, err := ds.AppsV1().StatefulSets("kube-system").Create(ctx, sts("kube-system", owned), dry)
			return err
		}},
		{"a Service that no placeholder owns", "driverset-guard-creates", func(ctx context.Context) error {
			_, err := ds.CoreV1().Services(ns).Create(ctx, svc(ns, nil), dry)
			return err
		}},
		{"a Service in driverset-system", "driverset-guard-creates", func(ctx context.Context) error {
			_, err := ds.CoreV1().Services("driverset-system").Create(ctx, svc("driverset-system", owned), dry)
			return err
		}},
		{"a StatefulSet that a second object owns too", creates, createSts(func(s *appsv1.StatefulSet) {
			s.OwnerReferences = append(s.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: plain.Name, UID: plain.UID})
		})},
		{"a StatefulSet named for another placeholder", creates, createSts(func(s *appsv1.StatefulSet) {
			s.Name, s.Labels[contract.LabelDriver] = "other-driver", "other-driver"
		})},
		{"a StatefulSet of two driver pods", creates, createSts(func(s *appsv1.StatefulSet) {
			s.Spec.Replicas = new(int32(2))
		})},
		{"a StatefulSet whose selector is wider than its driver pod", creates, createSts(func(s *appsv1.StatefulSet) {
			delete(s.Spec.Selector.MatchLabels, contract.LabelSparkRole)
		})},
		{"a StatefulSet whose pods run something else than driverset wrap", creates, createSts(func(s *appsv1.StatefulSet) {
			c := &s.Spec.Template.Spec.Containers[0]
			c.Image, c.Command, c.Args = "attacker/miner", []string{"/miner"}, nil
		})},
		{"a LoadBalancer Service for a placeholder", creates, createSvc(func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ClusterIP, s.Spec.PublishNotReadyAddresses = corev1.ServiceTypeLoadBalancer, "", false
		})},
		{"a Service with an external IP", creates, createSvc(func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ExternalIPs = "", []string{"192.0.2.10"}
		})},
		{"a headless Service selecting another workload", creates, createSvc(func(s *corev1.Service) {
			s.Spec.Selector = map[string]string{"app": "web"}
		})},
		{"a Service named for another placeholder", creates, createSvc(func(s *corev1.Service) {
			s.Name = "other-driver-ds"
		})},
		{"a gated pod's nodeSelector tightened", "driverset-guard-pods",
			patchPod(ns, plain.Name, `{"spec":{"nodeSelector":{"kubernetes.io/hostname":"attacker"}}}`)},
		{"a gated pod's affinity tightened", "driverset-guard-pods", patchPod(ns, plain.Name,
			`{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/hostname","operator":"In","values":["attacker"]}]}]}}}}}`)},
		{"an Event in kube-system", "driverset-guard-events", createEvent("kube-system", func(e *eventsv1.Event) {
			e.Regarding.Name = "kube-apiserver"
		})},
		{"an Event as the kubelet", "driverset-guard-events", createEvent(ns, func(e *eventsv1.Event) {
			e.ReportingController, e.ReportingInstance = "kubelet", "kubelet-node-1"
		})},
		// Events about cluster-scoped objects live in namespace default, which driverset serves.
		{"an Event about a Node", "events.driverset.dev", createEvent(metav1.NamespaceDefault, func(e *eventsv1.Event) {
			e.Regarding = corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "node-1"}
		})},
		{"an Event about another namespace's pod", "events.driverset.dev", createEvent(ns, func(e *eventsv1.Event) {
			e.Regarding.Namespace = "kube-system"
		})},
		{"its own StatefulSet's pod template changed", "driverset-guard-updates", patchSts(r.names.StatefulSet,
			`{"spec":{"template":{"spec":{"containers":[{"name":"`+contract.DriverContainerName+`","image":"attacker/miner"}]}}}}`)},
		{"a dangling ownerReference added to its StatefulSet", "driverset-guard-updates", patchSts(r.names.StatefulSet,
			`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"gone","uid":"6c4bd1e6-0000-0000-0000-000000000000"}]}}`)},
		{"its StatefulSet scaled to 2", "driverset-guard-updates", patchSts(r.names.StatefulSet, `{"spec":{"replicas":2}}`)},
		{"a StatefulSet that is not driverset's scaled", "driverset-guard-updates", patchSts(theirs.Name, `{"spec":{"replicas":5}}`)},
		{"a kube-system StatefulSet's pod template changed (given driverset's label)", "driverset-guard-updates", func(ctx context.Context) error {
			_, err := ds.AppsV1().StatefulSets(metav1.NamespaceSystem).Patch(ctx, system.Name, types.MergePatchType,
				[]byte(`{"spec":{"template":{"spec":{"hostNetwork":true,"containers":[{"name":"c","image":"attacker/miner"}]}}}}`), dryPatch)
			return err
		}},
		{"a claim's owner changed", "driverset-guard-updates", patchClaim(
			`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"gone","uid":"6c4bd1e6-0000-0000-0000-000000000000"}]}}`)},
		{"a claim's labels changed", "driverset-guard-updates", patchClaim(`{"metadata":{"labels":{"app":"db"}}}`)},
		{"a claim given another app's id", "driverset-guard-updates", patchClaim(
			`{"metadata":{"labels":{"spark-app-selector":null,"` + contract.LabelClaimAppSelector + `":"spark-2"}}}`)},
		{"a pod's image changed", "driverset-guard-pods",
			patchPod(ns, plain.Name, `{"spec":{"containers":[{"name":"web","image":"attacker/miner"}]}}`)},
		{"a pod's labels changed", "driverset-guard-pods",
			patchPod(ns, plain.Name, `{"metadata":{"labels":{"spark-role":"executor"}}}`)},
		{"an annotation that is not driverset's", "driverset-guard-pods",
			patchPod(ns, placeholder, `{"metadata":{"annotations":{"sidecar.example/inject":"true"}}}`)},
		{"driverset's annotation on a pod that is not a placeholder", "driverset-guard-pods",
			patchPod(ns, plain.Name, `{"metadata":{"annotations":{"`+contract.AnnotationRestarts+`":"1"}}}`)},
		{"a toleration added", "driverset-guard-pods", func(ctx context.Context) error {
			_, err := ds.CoreV1().Pods(ns).Patch(ctx, plain.Name, types.JSONPatchType,
				[]byte(`[{"op":"add","path":"/spec/tolerations/-","value":{"operator":"Exists"}}]`), dryPatch)
			return err
		}},
		{"a deadline set on the driver", "driverset-guard-pods",
			patchPod(ns, r.names.DriverPodName(), `{"spec":{"activeDeadlineSeconds":1}}`)},
		{"a gate other than driverset.dev/stale-executors lifted", "driverset-guard-pods", func(ctx context.Context) error {
			_, err := ds.CoreV1().Pods(ns).Patch(ctx, plain.Name, types.JSONPatchType,
				[]byte(`[{"op":"remove","path":"/spec/schedulingGates/0"}]`), dryPatch)
			return err
		}},
		{"the status of a pod that is not a placeholder", "driverset-guard-pods", func(ctx context.Context) error {
			_, err := ds.CoreV1().Pods(ns).Patch(ctx, plain.Name, types.MergePatchType,
				[]byte(`{"status":{"message":"hijacked"}}`), dryPatch, "status")
			return err
		}},
		{"a pod that is not Spark's deleted", "driverset-guard-pods", func(ctx context.Context) error {
			return ds.CoreV1().Pods(ns).Delete(ctx, plain.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		}},
		{"the webhook's failure policy changed", "driverset-guard-webhooks", func(ctx context.Context) error {
			_, err := ds.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, "driverset", types.JSONPatchType,
				[]byte(`[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]`), dryPatch)
			return err
		}},
		{"the webhook made to see every pod", "driverset-guard-webhooks", func(ctx context.Context) error {
			_, err := ds.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, "driverset", types.JSONPatchType,
				[]byte(`[{"op":"remove","path":"/webhooks/0/objectSelector"}]`), dryPatch)
			return err
		}},
		// The garbage collector deletes an object whose owner is gone: a dangling reference would
		// have it delete driverset's webhook configuration, and every Fail gate with it.
		{"a dangling ownerReference on the webhook configuration", "driverset-guard-webhooks", func(ctx context.Context) error {
			_, err := ds.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, "driverset", types.MergePatchType,
				[]byte(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"00000000-0000-0000-0000-000000000001"}]}}`), dryPatch)
			return err
		}},
		{"a finalizer on the webhook configuration", "driverset-guard-webhooks", func(ctx context.Context) error {
			_, err := ds.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, "driverset", types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":["example.com/hold"]}}`), dryPatch)
			return err
		}},
	}
	// The policies are applied with the manifests; the apiserver loads them asynchronously.
	// Only a refusal by the row's own policy counts: any error would (the wait's own deadline cuts
	// the last request short, which once passed this wait with that policy's binding removed).
	waitFor(t, 30*time.Second, "the apiserver enforcing driverset's guard rails", func(ctx context.Context) (bool, error) {
		err := refused[0].do(ctx)
		return err != nil && strings.Contains(err.Error(), refused[0].policy), nil
	})
	for _, tc := range refused {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			err := tc.do(ctx)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.policy) {
				t.Fatalf("refused, but not by %s: %v", tc.policy, err)
			}
			t.Logf("%v", err)
		})
	}
	// What driverset does itself still passes (the whole e2e suite runs driverset as this
	// ServiceAccount; these are its writes that no scenario may happen to make).
	allowed := []struct {
		name string
		do   func(context.Context) error
	}{
		{"its restart count on a placeholder", patchPod(ns, placeholder,
			`{"metadata":{"annotations":{"`+contract.AnnotationRestarts+`":"1","`+contract.AnnotationRestartsTotal+`":"1","`+contract.AnnotationRestartedIncarnation+`":"u"}}}`)},
		{"the gate driverset.dev/stale-executors lifted", func(ctx context.Context) error {
			_, err := ds.CoreV1().Pods(ns).Patch(ctx, plain.Name, types.JSONPatchType,
				[]byte(`[{"op":"remove","path":"/spec/schedulingGates/1"}]`), dryPatch)
			return err
		}},
		{"a placeholder's status", func(ctx context.Context) error {
			_, err := ds.CoreV1().Pods(ns).Patch(ctx, placeholder, types.MergePatchType,
				[]byte(`{"status":{"message":"driverset: checked"}}`), dryPatch, "status")
			return err
		}},
		// The name is taken by the objects driverset made: the apiserver answers AlreadyExists
		// only after every admission policy let the create through.
		{"a driver's StatefulSet as driverset builds it", alreadyMade(createSts(asIs))},
		{"a driver's headless Service as driverset builds it", alreadyMade(createSvc(func(*corev1.Service) {}))},
		{"an Event about a placeholder", createEvent(ns, func(*eventsv1.Event) {})},
		{"the webhook's caBundle", func(ctx context.Context) error {
			ca, err := certs.NewAuthority("rotated", time.Hour)
			if err != nil {
				return err
			}
			patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": ca.CertPEM}})
			if err != nil {
				return err
			}
			_, err = ds.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, "driverset", types.JSONPatchType, patch, dryPatch)
			return err
		}},
		{"its StatefulSet scaled to 0 (an ended app)", patchSts(r.names.StatefulSet, `{"spec":{"replicas":0}}`)},
		{"a driver claim's label moved out of Spark's clean stop", patchClaim(
			`{"metadata":{"labels":{"spark-app-selector":null,"` + contract.LabelClaimAppSelector + `":"spark-1"}}}`)},
		{"its driver pod deleted (a restart)", func(ctx context.Context) error {
			return ds.CoreV1().Pods(ns).Delete(ctx, r.names.DriverPodName(), metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		}},
	}
	for _, tc := range allowed {
		t.Run("allowed: "+tc.name, func(t *testing.T) {
			if err := tc.do(ctx); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

// alreadyMade passes a create whose only error is that its name is taken: admission ran and
// allowed it, and storage refused the duplicate.
func alreadyMade(create func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := create(ctx); !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	}
}
