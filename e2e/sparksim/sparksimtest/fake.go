// Package sparksimtest gives the simulator's unit tests a fake apiserver that behaves as the
// real one where Spark's calls need it.
package sparksimtest

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// NewFake is a fake clientset that, like an apiserver, gives every created object a UID and
// deletes a collection by label selector (client-go's tracker does neither).
func NewFake(objs ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(objs...)
	c.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if obj := a.(k8stesting.CreateAction).GetObject(); obj != nil {
			if m, err := meta.Accessor(obj); err == nil && m.GetUID() == "" {
				m.SetUID(types.UID("uid-" + m.GetName()))
			}
		}
		return false, nil, nil
	})
	c.PrependReactor("delete-collection", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, deleteCollection(c.Tracker(), a.(k8stesting.DeleteCollectionAction))
	})
	return c
}

// kinds are the kinds of the resources Spark deletes by label.
func kinds() map[string]string {
	return map[string]string{"pods": "Pod", "services": "Service", "configmaps": "ConfigMap",
		"persistentvolumeclaims": "PersistentVolumeClaim"}
}

func deleteCollection(tr k8stesting.ObjectTracker, a k8stesting.DeleteCollectionAction) error {
	gvr := a.GetResource()
	list, err := tr.List(gvr, gvr.GroupVersion().WithKind(kinds()[gvr.Resource]), a.GetNamespace())
	if err != nil {
		return err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	sel := a.GetListRestrictions().Labels
	for _, it := range items {
		m, err := meta.Accessor(it)
		if err != nil {
			return err
		}
		if sel.Matches(labels.Set(m.GetLabels())) {
			if err := tr.Delete(gvr, m.GetNamespace(), m.GetName()); err != nil {
				return err
			}
		}
	}
	return nil
}
