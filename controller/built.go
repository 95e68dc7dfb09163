package controller

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// conversionError is convert's refusal to build S from a placeholder, told apart from a failed
// read so that create can say so on the placeholder (Event ConversionFailed).
type conversionError struct{ err error }

func (e *conversionError) Error() string { return e.err.Error() }
func (e *conversionError) Unwrap() error { return e.err }

// statefulSetFor builds S for the whole placeholder p under names: the one builder, used by the
// controller to create S and by the creates webhook (Built) to check a create against. It writes
// nothing and records no Event: the webhook declares no side effects.
func (r *Placeholder) statefulSetFor(ctx context.Context, p *corev1.Pod, names contract.Names) (*appsv1.StatefulSet, error) {
	opts := r.Convert
	opts.Names = names
	var ranges corev1.LimitRangeList
	if err := r.Client.List(ctx, &ranges, client.InNamespace(p.Namespace)); err != nil {
		return nil, err
	}
	opts.Floor = convert.FloorOf(ranges.Items)
	_, opts.SelfFence, _ = r.fencing(p, 0)
	want, err := convert.StatefulSet(p, opts)
	if err != nil {
		return nil, &conversionError{err: err}
	}
	if err := rememberSettings(want, p); err != nil {
		return nil, err
	}
	// A finished app's StatefulSet, deleted by someone, is made again without a driver pod.
	want.Spec.Replicas = new(replicasFor(p))
	return want, nil
}

// Built is what driverset creates for placeholder p, read whole from the apiserver: its headless
// Service and its StatefulSet, under the names that go with the StatefulSet p controls, read from
// the apiserver (namesOfLive; the controller's pass reads the same through its cache, namesOf), by
// the builder the controller creates them with. refusal, when not "", says why driverset creates nothing for p:
// it is not a placeholder, it is being deleted, or it is not sealed (unsealed: a StatefulSet p
// already controls, from before seals, keeps its Service buildable).
//
// The creates webhook compares each StatefulSet and Service that driverset's ServiceAccount
// creates against this (docs/design.md#what-a-create-may-be): a stolen token gets nothing that
// driverset would not make itself.
func (r *Placeholder) Built(ctx context.Context, p *corev1.Pod) (svc *corev1.Service, sts *appsv1.StatefulSet, refusal string, err error) {
	switch {
	case !convert.IsPlaceholder(p):
		return nil, nil, fmt.Sprintf("pod %s is not a driverset placeholder", client.ObjectKeyFromObject(p)), nil
	case p.DeletionTimestamp != nil:
		return nil, nil, fmt.Sprintf("placeholder %s is being deleted: driverset builds nothing for it", client.ObjectKeyFromObject(p)), nil
	}
	// Live: a Service is admitted only under the name that goes with the StatefulSet p controls
	// now, whichever build named it, or with this build's names for p while it controls none.
	names, err := r.namesOfLive(ctx, p)
	if err != nil {
		return nil, nil, "", err
	}
	if refusal, err := r.unsealed(ctx, r.apiReader(), p, names); err != nil || refusal != "" {
		return nil, nil, refusal, err
	}
	if svc, err = convert.ServiceNamed(p, names); err != nil {
		return nil, nil, err.Error(), nil
	}
	sts, err = r.statefulSetFor(ctx, p, names)
	if conv := (*conversionError)(nil); errors.As(err, &conv) {
		return nil, nil, conv.Error(), nil
	}
	return svc, sts, "", err
}
