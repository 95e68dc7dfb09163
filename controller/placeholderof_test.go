package controller

import (
	"testing"

	"github.com/driverset/driverset/contract"
)

// TestPlaceholderOf: S-0's app is the placeholder that controls its StatefulSet, that very pod:
// a placeholder made again under the same name (a new app) is not it, nor is a pod of that UID
// that is no placeholder.
func TestPlaceholderOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replace func(h *cluster) // what becomes of the placeholder
		want    bool             // S-0's placeholder is found
	}{
		{name: "the placeholder itself", want: true},
		{name: "made again under the same name: another app", replace: func(h *cluster) {
			p := h.placeholder()
			p.Finalizers = nil // the old app is gone
			if err := h.c.Update(h.ctx, p); err != nil {
				t.Fatal(err)
			}
			if err := h.c.Delete(h.ctx, p); err != nil {
				t.Fatal(err)
			}
			p.ResourceVersion, p.UID = "", "another-app"
			if err := h.c.Create(h.ctx, p); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "no longer a placeholder", replace: func(h *cluster) {
			p := h.placeholder()
			delete(p.Labels, contract.LabelPlaceholder)
			delete(p.Annotations, contract.AnnotationResources)
			if err := h.c.Update(h.ctx, p); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := runningCluster(t, nil, nil)
			if tc.replace != nil {
				tc.replace(h)
			}
			got, err := (&Outcomes{Client: h.c}).placeholderOf(h.ctx, h.driver())
			if err != nil || (got != nil) != tc.want {
				t.Errorf("placeholderOf found %v (err %v), want found %v", got != nil, err, tc.want)
			}
		})
	}
}
