//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
	"github.com/driverset/driverset/e2e/sparksim"
)

// Real-world driver pod templates: what users put in spark.kubernetes.driver.podTemplateFile
// reaches the StatefulSet's pod, and the driver runs.

// A Spark 3.5 driver that spreads drivers with matchLabelKeys and keeps apart from its
// executors with pod (anti-)affinity label keys: the apiserver merges those keys into the
// placeholder's selectors, and S-0 must not get them merged twice (which the apiserver refuses).
func TestDriverWithMatchLabelKeysRuns(t *testing.T) {
	ns := namespace(t, nil)
	key := contract.LabelSparkAppSelector
	s := submitEdited(t, app(ns, "spread"), func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{contract.LabelSparkRole: contract.RoleDriver}},
			MatchLabelKeys: []string{key},
		}}
		p.Spec.Affinity = &corev1.Affinity{
			PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{
					TopologyKey:    "kubernetes.io/hostname",
					LabelSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{contract.LabelSparkRole: contract.RoleExecutor}},
					MatchLabelKeys: []string{key},
				},
			}}},
			PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{
					TopologyKey:       "kubernetes.io/hostname",
					LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{contract.LabelSparkRole: contract.RoleDriver}},
					MismatchLabelKeys: []string{key},
				},
			}}},
		}
	})
	p := getPod(t, ns, s.plan.DriverPodName)
	if got := p.Spec.TopologySpreadConstraints[0].LabelSelector.MatchExpressions; len(got) == 0 {
		t.Errorf("the apiserver did not merge matchLabelKeys into the placeholder's selector: this test no longer covers the case")
	}
	runningDriverWithin(t, 60*time.Second, ns, contract.NamesFor(p.Name), "")
	sts := getStatefulSet(t, ns, contract.NamesFor(p.Name).StatefulSet)
	if got := sts.Spec.Template.Spec.TopologySpreadConstraints[0].LabelSelector.MatchExpressions; len(got) != 0 {
		t.Errorf("the StatefulSet's template carries the merged selector %v", got)
	}
}

// A driver submitted with another controller's scheduling gate (Kueue, Volcano, a user's own):
// that controller lifts it on the placeholder or not at all, never on S-0, so S-0 must not carry
// it, or the driver never runs.
func TestForeignGateStaysOnThePlaceholder(t *testing.T) {
	ns := namespace(t, nil)
	const gate = "example.com/admission"
	s := submitEdited(t, app(ns, "gated"), func(p *corev1.Pod) {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: gate}}
	})
	names := contract.NamesFor(s.plan.DriverPodName)
	pod := runningDriverWithin(t, 60*time.Second, ns, names, "")
	for _, g := range pod.Spec.SchedulingGates {
		t.Errorf("S-0 carries gate %s", g.Name)
	}
	if p := getPod(t, ns, s.plan.DriverPodName); !convert.HasGate(&p.Spec, gate) {
		t.Errorf("the placeholder lost gate %s: %v", gate, p.Spec.SchedulingGates)
	}
}

// The namespace policy converts spark-submit's cluster drivers and leaves every other
// spark-role=driver pod as it is, with a warning: a Deployment's (a notebook, an operator's driver)
// and a client-mode driver run. The explicit opt-in label still refuses what cannot be converted.
func TestNamespacePolicyLeavesOtherDriversAlone(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, map[string]string{contract.LabelPolicy: contract.PolicyEnforce})
	// Each with its own app id: the invariant monitor groups driver pods by it.
	labels := map[string]string{"app": "notebook", contract.LabelSparkRole: contract.RoleDriver, contract.LabelSparkAppSelector: "spark-notebook"}
	one := int32(1)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "notebook"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: contract.DriverContainerName, Image: "apache/spark:3.5.3", Args: []string{"driver", "--class", "Pi", "pi.jar"},
				}}},
			},
		},
	}
	if _, err := kube().AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the Deployment's driver pod Running, unconverted", func(ctx context.Context) (bool, error) {
		pods, err := kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=notebook"})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		p := pods.Items[0]
		if len(p.Spec.SchedulingGates) != 0 || p.Labels[contract.LabelPlaceholder] != "" {
			return false, fmt.Errorf("the Deployment's pod was converted: gates %v labels %v", p.Spec.SchedulingGates, p.Labels)
		}
		return p.Status.Phase == corev1.PodRunning, nil
	})

	warnings := &recordedWarnings{}
	cfg := rest.CopyConfig(bed.cluster.Config)
	cfg.WarningHandler = warnings
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client-mode", Labels: map[string]string{
			contract.LabelSparkRole: contract.RoleDriver, contract.LabelSparkAppSelector: "spark-client-mode"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "shell", Image: "apache/spark:3.5.3", Args: []string{"spark-submit", "--deploy-mode", "client", "app.py"},
		}}},
	}
	got, err := c.CoreV1().Pods(ns).Create(ctx, client, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a client-mode driver in an enforce namespace was refused: %v", err)
	}
	if len(got.Spec.SchedulingGates) != 0 || got.Labels[contract.LabelPlaceholder] != "" {
		t.Errorf("the client-mode driver was converted: gates %v labels %v", got.Spec.SchedulingGates, got.Labels)
	}
	if w := warnings.all(); len(w) != 1 || !strings.Contains(w[0], "runs as it is, without driverset") {
		t.Errorf("warnings %q, want driverset's one warning that the pod runs without it", w)
	}

	optedIn := client.DeepCopy()
	optedIn.Name = "client-mode-opted-in"
	optedIn.Labels[contract.LabelSparkAppSelector] = "spark-client-mode-opted-in"
	optedIn.Labels[contract.LabelResilient] = "true"
	if _, err := kube().CoreV1().Pods(ns).Create(ctx, optedIn, metav1.CreateOptions{}); err == nil ||
		!strings.Contains(err.Error(), "driverset cannot take over driver pod") {
		t.Errorf("a pod opted in with the label that driverset cannot convert: %v, want driverset's refusal", err)
	}
}

// recordedWarnings keeps the apiserver's warnings to a client.
type recordedWarnings struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recordedWarnings) HandleWarningHeader(_ int, _ string, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, msg)
}

func (r *recordedWarnings) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

// A driver whose pod template sets pod-level resources (requests and limits): a ResourceQuota
// charges the pod-level values, so a quota sized for one driver and two executors (plus the
// placeholder's pod object) admits the whole app only if the placeholder is not charged them too.
func TestPodLevelResourcesAreChargedOnce(t *testing.T) {
	// Pod-level resources are beta and on by default from Kubernetes 1.34 (alpha, off, in 1.32
	// and 1.33; absent before): an older apiserver drops spec.resources, so no driver carries them
	// there and there is nothing to convert (make compat runs on such a version).
	if minor := serverMinor(t); minor < 34 {
		t.Skipf("Kubernetes 1.%d serves no pod-level resources (beta from 1.34)", minor)
	}
	ctx := context.Background()
	ns := namespace(t, nil)
	a := app(ns, "pod-level")
	plan, err := a.Plan()
	if err != nil {
		t.Fatal(err)
	}
	driver := plan.DriverPod.Spec.Containers[0].Resources
	podCPU, podMem := driver.Requests.Cpu().DeepCopy(), driver.Requests.Memory().DeepCopy()
	podCPU.Add(resource.MustParse("500m"))
	podMem.Add(resource.MustParse("256Mi"))
	podLevel := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: podCPU, corev1.ResourceMemory: podMem},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: podCPU, corev1.ResourceMemory: podMem},
	}
	oneAppQuota(t, ns, podCPU.DeepCopy(), podMem.DeepCopy(), driver.Requests)
	s := submitEdited(t, a, func(p *corev1.Pod) { p.Spec.Resources = podLevel.DeepCopy() })
	p := getPod(t, ns, s.plan.DriverPodName)
	if p.Spec.Resources == nil || !p.Spec.Resources.Requests.Cpu().IsZero() || !p.Spec.Resources.Requests.Memory().IsZero() {
		t.Errorf("the placeholder keeps pod-level resources %v, want 0", p.Spec.Resources)
	}
	d0 := runningDriver(t, ns, contract.NamesFor(p.Name), "")
	if d0.Spec.Resources == nil || d0.Spec.Resources.Requests.Cpu().Cmp(podCPU) != 0 || d0.Spec.Resources.Limits.Memory().Cmp(podMem) != 0 {
		t.Errorf("S-0's pod-level resources %v, want the driver's %v", d0.Spec.Resources, podLevel)
	}
	drv, err := sparksim.StartDriver(ctx, kube(), ns, d0.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := drv.RequestExecutors(ctx, 2); err != nil {
		t.Fatalf("executors refused under a quota sized for the app: %v", err)
	}
}
