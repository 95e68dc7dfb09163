//go:build testbed

package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/sparksim"
)

// A driver with a native sidecar (an init container with restartPolicy Always: a log shipper, a
// proxy) is converted with it: S-0 runs it as a sidecar still, and the namespace's quota, sized
// for the driver, its sidecar and two executors, admits all of them, so the sidecar is charged
// once (on S-0, not again through the placeholder).
func TestDriverWithANativeSidecarRuns(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	a := app(ns, "sidecar")
	plan, err := a.Plan()
	if err != nil {
		t.Fatal(err)
	}
	driver := plan.DriverPod.Spec.Containers[0].Resources
	side := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	cpu, mem := driver.Requests.Cpu().DeepCopy(), driver.Requests.Memory().DeepCopy()
	cpu.Add(*side.Cpu())
	mem.Add(*side.Memory())
	oneAppQuota(t, ns, cpu, mem, driver.Requests)
	always := corev1.ContainerRestartPolicyAlways
	s := submitEdited(t, a, func(p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{
			Name: "log-shipper", Image: "registry.example/log-shipper:1", RestartPolicy: &always,
			Resources: corev1.ResourceRequirements{Requests: side, Limits: side},
		})
	})
	d0 := runningDriver(t, ns, contract.NamesFor(s.plan.DriverPodName), "")
	if !hasSidecar(d0, "log-shipper") {
		t.Fatalf("S-0's init containers %v, want log-shipper with restartPolicy Always", initPolicies(d0))
	}
	drv, err := sparksim.StartDriver(ctx, kube(), ns, d0.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := drv.RequestExecutors(ctx, 2); err != nil {
		t.Fatalf("executors refused under a quota sized for the app and its sidecar: %v", err)
	}
}

func hasSidecar(p *corev1.Pod, name string) bool {
	for _, c := range p.Spec.InitContainers {
		if c.Name == name && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			return true
		}
	}
	return false
}

// initPolicies names each init container with its restartPolicy, for a failure message.
func initPolicies(p *corev1.Pod) []string {
	var out []string
	for _, c := range p.Spec.InitContainers {
		policy := "-"
		if c.RestartPolicy != nil {
			policy = string(*c.RestartPolicy)
		}
		out = append(out, c.Name+":"+policy)
	}
	return out
}
