//go:build testbed

package e2e

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// Attack (issue 35, the two smaller findings), as a tenant with edit, each through the real
// apiserver (its ServiceAccount plugin injects the pod's own token volume) and driverset's
// webhook:
//   - a volume mounted below /opt/driverset, where wrap keeps its run-once record: one that outlives
//     the pod (a claim) would carry "started" into the next incarnation, which would then never run
//     the driver. The submission is refused, naming the mount.
//   - a projected volume of the user's own whose name starts kube-api-access- (a token for another
//     audience): driverset drops the token volume the apiserver injects into the placeholder (S-0
//     gets its own), and must keep this one as the placeholder has it, or the driver starts
//     without it.
func TestTenantsVolumesAroundDriversetsOwn(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	c := tenant(t, ns)
	driverPod := func(name string, edit func(p *corev1.Pod, driver *corev1.Container)) *corev1.Pod {
		plan, err := app(ns, name).Plan()
		if err != nil {
			t.Fatal(err)
		}
		pod := plan.DriverPod.DeepCopy()
		pod.Name = name
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].Name == contract.DriverContainerName {
				edit(pod, &pod.Spec.Containers[i])
			}
		}
		return pod
	}

	_, err := c.CoreV1().Pods(ns).Create(ctx, driverPod("state", func(p *corev1.Pod, d *corev1.Container) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "state", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		d.VolumeMounts = append(d.VolumeMounts, corev1.VolumeMount{Name: "state", MountPath: "/opt/driverset/state"})
	}), metav1.CreateOptions{})
	if err == nil || !apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "denied") || !strings.Contains(err.Error(), "/opt/driverset/state") {
		t.Errorf("a driver mounting a volume at /opt/driverset/state was answered %v, want driverset's refusal naming the mount", err)
	} else {
		t.Logf("refused: %v", err)
	}

	const vault = "kube-api-access-vault"
	audience := "vault"
	placeholder, err := c.CoreV1().Pods(ns).Create(ctx, driverPod("vault", func(p *corev1.Pod, d *corev1.Container) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: vault, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: audience, Path: "token"}}},
		}}})
		d.VolumeMounts = append(d.VolumeMounts, corev1.VolumeMount{Name: vault, MountPath: "/var/run/secrets/vault", ReadOnly: true})
	}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The apiserver's ServiceAccount plugin takes any volume named kube-api-access-* for the pod's
	// token volume: it injects none of its own and mounts this one where the token goes too. So
	// the placeholder is as the user asked, and S-0 must be the same.
	var asked []corev1.VolumeMount
	for _, ct := range placeholder.Spec.Containers {
		if ct.Name == contract.DriverContainerName {
			for _, m := range ct.VolumeMounts {
				if m.Name == vault {
					asked = append(asked, m)
				}
			}
		}
	}
	t.Logf("the placeholder's driver container mounts %s as %+v", vault, asked)
	names := contract.NamesFor("vault")
	waitFor(t, 60*time.Second, "StatefulSet "+names.StatefulSet, func(ctx context.Context) (bool, error) {
		_, err := kube().AppsV1().StatefulSets(ns).Get(ctx, names.StatefulSet, metav1.GetOptions{})
		return err == nil, nil
	})
	tmpl := getStatefulSet(t, ns, names.StatefulSet).Spec.Template.Spec
	var kept []string
	for _, v := range tmpl.Volumes {
		if strings.HasPrefix(v.Name, "kube-api-access-") {
			kept = append(kept, v.Name)
		}
	}
	if len(kept) != 1 || kept[0] != vault {
		t.Errorf("the StatefulSet's token volumes are %v: want the user's own %s alone", kept, vault)
	}
	var mounts []corev1.VolumeMount
	for _, ct := range tmpl.Containers {
		for _, m := range ct.VolumeMounts {
			if ct.Name == contract.DriverContainerName && m.Name == vault {
				mounts = append(mounts, m)
			}
		}
	}
	if !reflect.DeepEqual(mounts, asked) || len(asked) == 0 {
		t.Errorf("the driver container of the StatefulSet mounts %s as %+v, the placeholder's as %+v", vault, mounts, asked)
	}
}
