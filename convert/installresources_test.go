package convert

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestInstallResources is the init container's sizing: 50m CPU and 32Mi, requests equal to
// limits, raised to the namespace's floor only where the floor is higher. Quantities are compared
// as written: a floor equal to the default, spelled otherwise, leaves the default as it was.
func TestInstallResources(t *testing.T) {
	cases := []struct {
		name  string
		floor corev1.ResourceList
		want  map[corev1.ResourceName]string
	}{
		{name: "no floor: the defaults", floor: nil,
			want: map[corev1.ResourceName]string{"cpu": "50m", "memory": "32Mi"}},
		{name: "a floor below the defaults changes nothing", floor: list("cpu", "10m", "memory", "16Mi"),
			want: map[corev1.ResourceName]string{"cpu": "50m", "memory": "32Mi"}},
		{name: "a floor above the defaults raises both", floor: list("cpu", "100m", "memory", "64Mi"),
			want: map[corev1.ResourceName]string{"cpu": "100m", "memory": "64Mi"}},
		{name: "a floor equal to the defaults, spelled otherwise, keeps them as written", floor: list("cpu", "0.05", "memory", "33554432"),
			want: map[corev1.ResourceName]string{"cpu": "50m", "memory": "32Mi"}},
		{name: "a floor of another resource is added", floor: list("ephemeral-storage", "1Gi"),
			want: map[corev1.ResourceName]string{"cpu": "50m", "memory": "32Mi", "ephemeral-storage": "1Gi"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := installResources(tc.floor)
			for what, l := range map[string]corev1.ResourceList{"requests": got.Requests, "limits": got.Limits} {
				if len(l) != len(tc.want) {
					t.Errorf("%s %v, want %v", what, l, tc.want)
				}
				for name, want := range tc.want {
					if q, ok := l[name]; !ok || q.String() != want {
						t.Errorf("%s[%s] = %s (present: %t), want %s", what, name, q.String(), ok, want)
					}
				}
			}
		})
	}
}
