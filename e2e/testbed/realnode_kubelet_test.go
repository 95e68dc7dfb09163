package testbed

import (
	"reflect"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestKubeletConfigSettings: what KubeletSettings add to a real node's kubelet configuration,
// read back as the kubelet reads its file (YAML); the zero value adds nothing.
func TestKubeletConfigSettings(t *testing.T) {
	defaults := map[string]any{
		"memory.available": "50Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%", "imagefs.available": "1%",
	}
	cases := []struct {
		name     string
		settings KubeletSettings
		want     map[string]any // keys of the configuration; nil: must be absent
	}{
		{
			name: "defaults: hard thresholds a test VM never trips, no shutdown manager, no soft eviction",
			want: map[string]any{"evictionHard": defaults, "shutdownGracePeriod": nil, "shutdownGracePeriodCriticalPods": nil,
				"evictionSoft": nil, "evictionSoftGracePeriod": nil, "evictionMaxPodGracePeriod": nil},
		},
		{
			name:     "graceful node shutdown",
			settings: KubeletSettings{ShutdownGracePeriod: 20 * time.Second, ShutdownGracePeriodCriticalPods: 5 * time.Second},
			want: map[string]any{"evictionHard": defaults, "shutdownGracePeriod": "20s", "shutdownGracePeriodCriticalPods": "5s",
				"evictionSoft": nil},
		},
		{
			name: "soft eviction: the thresholds, a grace period for each, the pods' grace",
			settings: KubeletSettings{EvictionSoft: map[string]string{"memory.available": "24Gi"},
				EvictionSoftGracePeriod: 15 * time.Second, EvictionMaxPodGracePeriodSeconds: 10},
			want: map[string]any{"evictionHard": defaults, "shutdownGracePeriod": nil,
				"evictionSoft":              map[string]any{"memory.available": "24Gi"},
				"evictionSoftGracePeriod":   map[string]any{"memory.available": "15s"},
				"evictionMaxPodGracePeriod": float64(10)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := renderTemplate("kubelet.yaml", kubeletConfig, realNodeParams{Kubelet: tc.settings})
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := yaml.Unmarshal(b, &got); err != nil {
				t.Fatalf("rendered configuration is not YAML: %v\n%s", err, b)
			}
			for key, want := range tc.want {
				v, ok := got[key]
				if want == nil {
					if ok {
						t.Errorf("%s = %v, want it absent", key, v)
					}
					continue
				}
				if !reflect.DeepEqual(v, want) {
					t.Errorf("%s = %#v, want %#v", key, v, want)
				}
			}
		})
	}
}
