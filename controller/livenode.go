package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// liveNode reads the Node named name from the apiserver (nil: it does not exist), for a step
// that cannot be undone. Passes that ask while a read of that Node is under way share it: on a
// node that held many drivers, their passes run at once and each would otherwise read the same
// Node, one request per driver before its force-delete; PodGC too reads a node once for all its
// pods. Nothing is kept once the read ends: a pass that asks later reads again.
func (r *Placeholder) liveNode(ctx context.Context, name string) (*corev1.Node, error) {
	v, err, _ := r.nodeReads.Do(name, func() (any, error) {
		node := &corev1.Node{}
		if err := r.apiReader().Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
			if apierrors.IsNotFound(err) {
				return (*corev1.Node)(nil), nil
			}
			return nil, err
		}
		return node, nil
	})
	if err != nil {
		return nil, err
	}
	// Each pass gets its own copy: the read is shared between goroutines.
	return v.(*corev1.Node).DeepCopy(), nil
}
