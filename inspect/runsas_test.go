package inspect

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/driverset/driverset/convert"
)

// The app id status shows is the one the incarnation runs with, decided as wrap decides it
// (wrap.Options.RunsAs): cut to fit Spark's StatefulSet executor allocator when the driver's
// settings choose it. spark-submit writes those settings into the properties file its ConfigMap
// holds, mounted into the driver container, so status reads that ConfigMap; one it may not read
// leaves the whole id, and says so.
func TestStatusShowsTheIDTheIncarnationRunsWith(t *testing.T) {
	const uid = "3f2a9c1e-0b1c-4d2e-9f30-112233445566"
	const submitted = "spark-92fe034a2bc24e8c941c1aee17019678"
	const whole, cut = submitted + "-3f2a9c1e", "spark-92fe034a2bc24e8c941c1aee17-3f2a9c1e"
	driver := func() *corev1.Pod {
		d := driverPod(uid, "n1")
		c := &d.Spec.Containers[1]
		c.Command = []string{convert.BinaryPath, "wrap", "--spark-app-id", submitted, "--incarnation", "$(DRIVERSET_POD_UID)", "--", "/opt/entrypoint.sh"}
		c.Args = []string{"driver", "--conf", "spark.app.id=" + submitted, "--properties-file", "/opt/spark/conf/spark.properties", "--class", "Pi", "spark-internal"}
		c.VolumeMounts = []corev1.VolumeMount{{Name: "spark-conf-volume-driver", MountPath: "/opt/spark/conf"}}
		d.Spec.Volumes = []corev1.Volume{{Name: "spark-conf-volume-driver", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "spark-drv-1-conf-map"},
			Items:                []corev1.KeyToPath{{Key: "spark.properties", Path: "spark.properties"}},
		}}}}
		return d
	}
	conf := func(allocator string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "spark-drv-1-conf-map", Namespace: "jobs"},
			Data: map[string]string{"spark.properties": "spark.app.name=pi\nspark.kubernetes.allocation.pods.allocator=" + allocator + "\n"}}
	}
	cases := []struct {
		name      string
		objects   []runtime.Object
		forbidden bool
		want      string
	}{
		{"the StatefulSet allocator in the properties file: the cut id", []runtime.Object{conf("statefulset")}, false, cut},
		{"the direct allocator: the whole id", []runtime.Object{conf("direct")}, false, whole},
		{"no ConfigMap left: the whole id", nil, false, whole},
		{"a ConfigMap the user may not read: the whole id, and it says so", []runtime.Object{conf("statefulset")}, true, whole},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(append([]runtime.Object{placeholder(), statefulSet(), driver()}, tc.objects...)...)
			if tc.forbidden {
				c.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "spark-drv-1-conf-map", nil)
				})
			}
			s, err := Fetch(context.Background(), c, "jobs", "pi-driver")
			if err != nil {
				t.Fatal(err)
			}
			st := StatusOf(s)
			if st.RunsAs != tc.want {
				t.Errorf("RunsAs = %q, want %q", st.RunsAs, tc.want)
			}
			if st.PropertiesNotVisible != tc.forbidden {
				t.Errorf("PropertiesNotVisible = %v, want %v", st.PropertiesNotVisible, tc.forbidden)
			}
		})
	}
}
