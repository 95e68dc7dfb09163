package sparksim

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/driverset/driverset/contract"
)

// OnDemand is the claimName that makes Spark create the claim itself
// (MountVolumesFeatureStep.PVC_ON_DEMAND, 3.1+ for executors, 3.2+ for the driver).
const OnDemand = "OnDemand"

// driverPVCPrefix is the conf prefix of the driver's persistentVolumeClaim volumes
// (KubernetesVolumeUtils: spark.kubernetes.driver.volumes.<type>.<name>.{mount.*,options.*}).
const driverPVCPrefix = "spark.kubernetes.driver.volumes.persistentVolumeClaim."

// pvcVolume is one driver persistentVolumeClaim volume of the conf.
type pvcVolume struct {
	name, mountPath, subPath, claimName, storageClass, size string
	readOnly                                                bool
}

// driverPVCVolumes reads the driver's persistentVolumeClaim volumes from conf, ordered by volume
// name. Spark numbers the volumes it mounts (the i of "<prefix>-driver-pvc-<i>") in the order of
// a Scala Set of the parsed specs, which for one volume is 0: the simulation sorts by name so that
// several volumes are at least deterministic.
func driverPVCVolumes(conf map[string]string) []pvcVolume {
	byName := map[string]*pvcVolume{}
	for k, v := range conf {
		rest, ok := strings.CutPrefix(k, driverPVCPrefix)
		if !ok {
			continue
		}
		name, key, ok := strings.Cut(rest, ".")
		if !ok {
			continue
		}
		vol := byName[name]
		if vol == nil {
			vol = &pvcVolume{name: name}
			byName[name] = vol
		}
		switch key {
		case "mount.path":
			vol.mountPath = v
		case "mount.subPath":
			vol.subPath = v
		case "mount.readOnly":
			vol.readOnly = v == "true"
		case "options.claimName":
			vol.claimName = v
		case "options.storageClass":
			vol.storageClass = v
		case "options.sizeLimit":
			vol.size = v
		}
	}
	var out []pvcVolume
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, *byName[name])
	}
	return out
}

// mountPVCs is MountVolumesFeatureStep for the driver's persistentVolumeClaim volumes: each
// becomes a pod volume and a mount of the driver container; a claim with a storage class and a
// size is also a claim spark-submit creates after the pod (driverKubernetesResources), labelled
// with the app id, claimName OnDemand replaced by "<prefix>-driver-pvc-<i>". The access mode is
// ReadWriteOncePod since 3.4 (spark.kubernetes.legacy.useReadWriteOnceAccessMode restores
// ReadWriteOnce); 2.4 creates no claims.
func (b driverBuilder) mountPVCs(pod *corev1.PodSpec, ctr *corev1.Container) ([]*corev1.PersistentVolumeClaim, error) {
	var claims []*corev1.PersistentVolumeClaim
	for i, v := range driverPVCVolumes(b.conf) {
		if v.mountPath == "" || v.claimName == "" {
			return nil, fmt.Errorf("sparksim: driver volume %s needs mount.path and options.claimName", v.name)
		}
		claim := strings.ReplaceAll(v.claimName, OnDemand, fmt.Sprintf("%s-driver-pvc-%d", b.plan.Prefix, i))
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: v.name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: v.readOnly}}})
		ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: v.name, MountPath: v.mountPath, SubPath: v.subPath, ReadOnly: v.readOnly})
		if b.t.oldConfMap || v.storageClass == "" || v.size == "" {
			continue
		}
		size, err := resource.ParseQuantity(v.size)
		if err != nil {
			return nil, fmt.Errorf("sparksim: driver volume %s size %q: %w", v.name, v.size, err)
		}
		mode := corev1.ReadWriteOncePod
		if b.conf["spark.kubernetes.legacy.useReadWriteOnceAccessMode"] == "true" {
			mode = corev1.ReadWriteOnce
		}
		claims = append(claims, &corev1.PersistentVolumeClaim{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: metav1.ObjectMeta{
				Name: claim, Namespace: b.conf["spark.kubernetes.namespace"],
				Labels: map[string]string{contract.LabelSparkAppSelector: b.plan.AppID},
			},
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: ptr.To(v.storageClass),
				AccessModes:      []corev1.PersistentVolumeAccessMode{mode},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			},
		})
	}
	return claims, nil
}
