// Package release takes driverset's finalizer driverset.dev/outcome off what would otherwise wait
// for driverset forever: the pod template of each driver StatefulSet (so that no new S-0 carries
// it), and driver pods and placeholders. It is `driverset uninstall-cleanup`, run by the chart's
// pre-delete hook, and by hand for a kustomize install or a drain while driverset is down.
//
// What it must not do, and why:
//   - touch anything but that one finalizer: every change is a JSON patch that tests the object's
//     resourceVersion and the finalizer at its index, then removes that index alone; a concurrent
//     writer makes the patch fail and the object is read again, never overwritten;
//   - change the template of a StatefulSet that would roll its pod for it: driverset makes them
//     OnDelete, so a template change never restarts a running driver; any other strategy is
//     reported and left alone;
//   - with TerminatingOnly (driverset down for a while, coming back), touch templates or pods that
//     are not being deleted: those keep the "no exit lost" guarantee for when driverset returns.
package uninstall

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/driverset/driverset/contract"
)

// Options says where and what to release.
type Options struct {
	// Namespaces to look in; none is every namespace.
	Namespaces []string
	// TerminatingOnly releases only pods already being deleted, and leaves the templates: for a
	// drain or node upgrade while driverset is down and will come back. Without it (uninstall),
	// every template and every driverset pod is released, since nothing would ever remove it.
	TerminatingOnly bool
	// DryRun reports what would be done and changes nothing.
	DryRun bool
}

// Action is one object released, or left alone and why.
type Action struct {
	Kind, Namespace, Name string
	// Skipped, when not empty, says why the object was left alone.
	Skipped string
}

func (a Action) String() string {
	if a.Skipped != "" {
		return fmt.Sprintf("%s %s/%s: left alone: %s", a.Kind, a.Namespace, a.Name, a.Skipped)
	}
	return fmt.Sprintf("%s %s/%s: finalizer %s removed", a.Kind, a.Namespace, a.Name, contract.FinalizerOutcome)
}

// pageSize bounds each list: a cluster's executors carry the driver label too, and are many.
const pageSize = 500

func page(selector, cont string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: selector, Limit: pageSize, Continue: cont}
}

// retries bounds the re-reads after a concurrent write: each one is a real change by someone else.
const retries = 5

// Run releases what o names and reports each object it changed (or, with DryRun, would change) or
// left alone. Objects without the finalizer are not reported: a second run does nothing.
// Templates come first, so that no S-0 made after the pods were listed carries the finalizer.
func Run(ctx context.Context, c kubernetes.Interface, o Options) ([]Action, error) {
	namespaces := o.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	var out []Action
	if !o.TerminatingOnly {
		for _, ns := range namespaces {
			acts, err := templates(ctx, c, ns, o.DryRun)
			out = append(out, acts...)
			if err != nil {
				return out, err
			}
		}
	}
	for _, ns := range namespaces {
		for _, sel := range []string{contract.LabelDriver, contract.LabelPlaceholder + "=true"} {
			acts, err := pods(ctx, c, ns, sel, o)
			out = append(out, acts...)
			if err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

func templates(ctx context.Context, c kubernetes.Interface, ns string, dryRun bool) ([]Action, error) {
	var out []Action
	for cont := ""; ; {
		list, err := c.AppsV1().StatefulSets(ns).List(ctx, page(contract.LabelDriver, cont))
		if err != nil {
			return out, fmt.Errorf("listing driver StatefulSets: %w", err)
		}
		acts, err := templatesOf(ctx, c, list.Items, dryRun)
		out = append(out, acts...)
		if err != nil {
			return out, err
		}
		if cont = list.Continue; cont == "" {
			return out, nil
		}
	}
}

func templatesOf(ctx context.Context, c kubernetes.Interface, items []appsv1.StatefulSet, dryRun bool) ([]Action, error) {
	var out []Action
	for i := range items {
		s := &items[i]
		a, acted := Action{Kind: "StatefulSet", Namespace: s.Namespace, Name: s.Name}, false
		err := retry(ctx, s, func(s *appsv1.StatefulSet) (bool, error) {
			at := slices.Index(s.Spec.Template.Finalizers, contract.FinalizerOutcome)
			if at < 0 {
				return false, nil
			}
			acted = true
			if s.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
				a.Skipped = fmt.Sprintf("update strategy %q would restart its pod for a template change", s.Spec.UpdateStrategy.Type)
				return true, nil
			}
			if dryRun {
				return true, nil
			}
			p := removeAt(s.ResourceVersion, "/spec/template/metadata/finalizers", at)
			_, err := c.AppsV1().StatefulSets(s.Namespace).Patch(ctx, s.Name, types.JSONPatchType, p, metav1.PatchOptions{})
			return true, err
		}, func() (*appsv1.StatefulSet, error) {
			return c.AppsV1().StatefulSets(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		})
		if err != nil {
			return out, fmt.Errorf("StatefulSet %s/%s: %w", s.Namespace, s.Name, err)
		}
		if acted {
			out = append(out, a)
		}
	}
	return out, nil
}

func pods(ctx context.Context, c kubernetes.Interface, ns, selector string, o Options) ([]Action, error) {
	var out []Action
	for cont := ""; ; {
		list, err := c.CoreV1().Pods(ns).List(ctx, page(selector, cont))
		if err != nil {
			return out, fmt.Errorf("listing pods (%s): %w", selector, err)
		}
		acts, err := podsOf(ctx, c, list.Items, o)
		out = append(out, acts...)
		if err != nil {
			return out, err
		}
		if cont = list.Continue; cont == "" {
			return out, nil
		}
	}
}

func podsOf(ctx context.Context, c kubernetes.Interface, items []corev1.Pod, o Options) ([]Action, error) {
	var out []Action
	for i := range items {
		p := &items[i]
		acted := false
		err := retry(ctx, p, func(p *corev1.Pod) (bool, error) {
			at := slices.Index(p.Finalizers, contract.FinalizerOutcome)
			if at < 0 || (o.TerminatingOnly && p.DeletionTimestamp == nil) {
				return false, nil
			}
			acted = true
			if o.DryRun {
				return true, nil
			}
			_, err := c.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.JSONPatchType,
				removeAt(p.ResourceVersion, "/metadata/finalizers", at), metav1.PatchOptions{})
			return true, err
		}, func() (*corev1.Pod, error) {
			return c.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		})
		if err != nil {
			return out, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		if acted {
			out = append(out, Action{Kind: "Pod", Namespace: p.Namespace, Name: p.Name})
		}
	}
	return out, nil
}

// retry runs try on obj and, when its patch fails because obj changed (a failed test operation
// is Invalid, a resourceVersion mismatch a Conflict), on a fresh read of it. An object gone in
// between has nothing left to release.
func retry[T any](ctx context.Context, obj *T, try func(*T) (bool, error), get func() (*T, error)) error {
	for n := 0; ; n++ {
		_, err := try(obj)
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		changed := apierrors.IsInvalid(err) || apierrors.IsConflict(err)
		if !changed || n == retries {
			return err
		}
		if obj, err = get(); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// removeAt is a JSON patch that removes the finalizer at index at of the list at path, only if
// the object is still at resourceVersion rv and that index still holds driverset's finalizer.
func removeAt(rv, path string, at int) []byte {
	elem := fmt.Sprintf("%s/%d", path, at)
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
		{"op": "test", "path": elem, "value": contract.FinalizerOutcome},
		{"op": "remove", "path": elem},
	}
	b, _ := json.Marshal(ops) // maps of strings cannot fail to marshal
	return b
}
