package webhook

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The rule of the creates webhook, pure: a StatefulSet or Service created with driverset's token
// must be what driverset builds, field for field, but for what the apiserver fills in itself.
// Nothing is judged "harmless": any difference is refused, and the answer names its first field,
// so a new Kubernetes default the builder does not know shows up as that field, not as a let-through.

// StatefulSetAsBuilt says where got, a StatefulSet as the apiserver is asked to create it (its
// defaults applied), differs from want, what driverset builds for its placeholder; "" where it
// does not. Compared: the name, labels, annotations, ownerReferences and finalizers, and the whole
// spec, the pod template included. The one allowed difference is fewer replicas: 0 where driverset
// builds 1 runs nothing, and driverset scales its own StatefulSets anyway.
func StatefulSetAsBuilt(got, want *appsv1.StatefulSet) string {
	g, w := got.DeepCopy(), want.DeepCopy()
	defaultStatefulSet(g)
	defaultStatefulSet(w)
	if *g.Spec.Replicas > *w.Spec.Replicas {
		return fmt.Sprintf("spec.replicas is %d, driverset builds %d", *g.Spec.Replicas, *w.Spec.Replicas)
	}
	g.Spec.Replicas = w.Spec.Replicas
	if d := metaDifference(g.ObjectMeta, w.ObjectMeta); d != "" {
		return d
	}
	return differs("spec", g.Spec, w.Spec)
}

// ServiceAsBuilt is StatefulSetAsBuilt for the headless Service. The apiserver chooses the IP
// families of a headless Service by the cluster's configuration: they are left out, as they
// neither select nor expose anything.
func ServiceAsBuilt(got, want *corev1.Service) string {
	g, w := got.DeepCopy(), want.DeepCopy()
	for _, s := range []*corev1.Service{g, w} {
		defaultService(s)
		s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = nil, nil
	}
	if d := metaDifference(g.ObjectMeta, w.ObjectMeta); d != "" {
		return d
	}
	return differs("spec", g.Spec, w.Spec)
}

// metaDifference compares what of an object's metadata says what it is and who owns it; the
// fields the apiserver sets (uid, resourceVersion, managedFields, timestamps) are not compared.
func metaDifference(got, want metav1.ObjectMeta) string {
	type meta struct {
		Name            string                  `json:"name"`
		Labels          map[string]string       `json:"labels"`
		Annotations     map[string]string       `json:"annotations"`
		OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
		Finalizers      []string                `json:"finalizers"`
	}
	view := func(m metav1.ObjectMeta) meta {
		return meta{m.Name, m.Labels, m.Annotations, m.OwnerReferences, m.Finalizers}
	}
	return differs("metadata", view(got), view(want))
}

// differs is the path (as in the API's JSON, e.g. spec.template.spec.containers[1].image) of the
// first field in which got and want differ, with both values when it is a scalar; "" when they do
// not. equality.Semantic decides, as for the apiserver's own no-op checks: nil and empty alike,
// quantities by value.
func differs(path string, got, want any) string {
	return firstDifference(path, reflect.ValueOf(got), reflect.ValueOf(want))
}

func firstDifference(path string, got, want reflect.Value) string {
	if got.IsValid() != want.IsValid() {
		return path + " is " + presence(got)
	}
	if !got.IsValid() || equality.Semantic.DeepEqual(got.Interface(), want.Interface()) {
		return ""
	}
	switch got.Kind() {
	case reflect.Pointer, reflect.Interface:
		if got.IsNil() || want.IsNil() {
			return path + " is " + presence(got)
		}
		return firstDifference(path, got.Elem(), want.Elem())
	case reflect.Struct:
		t := got.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				// A value type (resource.Quantity, metav1.Time): Semantic found it different.
				break
			}
			if d := firstDifference(join(path, jsonName(f)), got.Field(i), want.Field(i)); d != "" {
				return d
			}
		}
	case reflect.Slice:
		if got.Len() != want.Len() {
			return fmt.Sprintf("%s has %d entries, driverset builds %d", path, got.Len(), want.Len())
		}
		for i := range got.Len() {
			if d := firstDifference(fmt.Sprintf("%s[%d]", path, i), got.Index(i), want.Index(i)); d != "" {
				return d
			}
		}
	case reflect.Map:
		keys := map[string]reflect.Value{}
		for _, k := range append(got.MapKeys(), want.MapKeys()...) {
			keys[fmt.Sprint(k.Interface())] = k
		}
		names := make([]string, 0, len(keys))
		for n := range keys {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			if d := firstDifference(fmt.Sprintf("%s[%s]", path, n), got.MapIndex(keys[n]), want.MapIndex(keys[n])); d != "" {
				return d
			}
		}
	case reflect.String:
		return fmt.Sprintf("%s is %q, driverset builds %q", path, got.String(), want.String())
	default:
		return fmt.Sprintf("%s is %v, driverset builds %v", path, got.Interface(), want.Interface())
	}
	return path
}

// presence says whether a value was given, for a field one side has and the other has not.
func presence(v reflect.Value) string {
	if !v.IsValid() || (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
		return "absent, driverset builds it"
	}
	return "set, driverset builds none"
}

// jsonName is the field's name in the API's JSON; "" for an inlined struct (a Probe's handler,
// a Volume's source), whose fields sit at its parent's level.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" && !f.Anonymous && !strings.Contains(f.Tag.Get("json"), "inline") {
		return f.Name
	}
	return name
}

func join(path, name string) string {
	if name == "" {
		return path
	}
	return path + "." + name
}

// The apiserver's defaults (k8s.io/kubernetes/pkg/apis/{apps,core}/v1, SetDefaults_*) for the fields
// driverset's builder leaves empty, applied to both sides: what the apiserver decodes into the
// admission request is the builder's object with these filled in. The placeholder the template is
// copied from was defaulted when it was created, so only the fields the builder adds or clears,
// and the StatefulSet's own, need them here. A default missing from this list refuses driverset's
// own creates (fails closed) and is named by the answer; the e2e suite runs every create through it.

func defaultStatefulSet(s *appsv1.StatefulSet) {
	spec := &s.Spec
	if spec.Replicas == nil {
		spec.Replicas = new(int32(1))
	}
	if spec.RevisionHistoryLimit == nil {
		spec.RevisionHistoryLimit = new(int32(10))
	}
	if spec.PodManagementPolicy == "" {
		spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if spec.UpdateStrategy.Type == "" {
		spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
	}
	if spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType {
		if spec.UpdateStrategy.RollingUpdate == nil {
			spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
		if spec.UpdateStrategy.RollingUpdate.Partition == nil {
			spec.UpdateStrategy.RollingUpdate.Partition = new(int32(0))
		}
	}
	if spec.PersistentVolumeClaimRetentionPolicy == nil {
		spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	if spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted == "" {
		spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if spec.PersistentVolumeClaimRetentionPolicy.WhenScaled == "" {
		spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	defaultPodSpec(&spec.Template.Spec)
}

func defaultPodSpec(spec *corev1.PodSpec) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = new(int64(corev1.DefaultTerminationGracePeriodSeconds))
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = new(corev1.DefaultEnableServiceLinks)
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			defaultContainer(&cs[i], spec.HostNetwork)
		}
	}
}

func defaultContainer(c *corev1.Container, hostNetwork bool) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
		if hostNetwork && c.Ports[i].HostPort == 0 {
			c.Ports[i].HostPort = c.Ports[i].ContainerPort
		}
	}
	for i := range c.Env {
		if f := c.Env[i].ValueFrom; f != nil && f.FieldRef != nil && f.FieldRef.APIVersion == "" {
			f.FieldRef.APIVersion = "v1"
		}
	}
}

// defaultPullPolicy is the apiserver's: Always for an image without a tag or digest, or tagged
// latest; IfNotPresent otherwise.
func defaultPullPolicy(image string) corev1.PullPolicy {
	if strings.Contains(image, "@") {
		return corev1.PullIfNotPresent
	}
	name := image[strings.LastIndex(image, "/")+1:]
	_, tag, tagged := strings.Cut(name, ":")
	if !tagged || tag == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

func defaultService(s *corev1.Service) {
	spec := &s.Spec
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if len(spec.ClusterIPs) == 0 && spec.ClusterIP != "" {
		spec.ClusterIPs = []string{spec.ClusterIP}
	}
	if spec.InternalTrafficPolicy == nil && spec.Type != corev1.ServiceTypeExternalName {
		spec.InternalTrafficPolicy = new(corev1.ServiceInternalTrafficPolicyCluster)
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == (intstr.IntOrString{}) {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
}
