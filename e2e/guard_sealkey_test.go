//go:build testbed

package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/driverset/driverset/seal"
)

// asServiceAccount is a client acting as ServiceAccount name of driverset's namespace.
func asServiceAccount(t *testing.T, name string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(bed.cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:driverset-system:" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:driverset-system", "system:authenticated"},
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Issue 35, attack: a holder of driverset's token reads the seal key (Secret driverset-seal), and
// with a pod-create right anywhere forges a sealed placeholder there (a GPU driver nobody granted).
// The key is now made by the Job driverset-make-seal-key as a ServiceAccount of its own, which may
// only create Secrets, and reaches the replicas as a Secret volume (the kubelet reads it):
// driverset's token may neither read, list, watch nor make it. Before (the old manifests): the get
// was allowed, and returned the key.
func TestDriversetTokenCannotReadTheSealKey(t *testing.T) {
	ctx := context.Background()
	const ns, name = "driverset-system", "driverset-seal"

	// The key-maker, as its own ServiceAccount with the manifests' RBAC, makes the key (or finds
	// it, when an earlier run did) and cannot read it back.
	maker := asServiceAccount(t, "driverset-make-seal-key")
	if _, err := seal.MakeKey(ctx, maker, ns, name); err != nil {
		t.Fatalf("the key-maker's ServiceAccount could not make the key: %v", err)
	}
	if _, err := maker.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the key-maker reads the key back: %v, want Forbidden", err)
	}
	first, err := kube().CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || len(first.Data[seal.KeyField]) < seal.MinKeyLen {
		t.Fatalf("the Secret the key-maker made: %v", err)
	}
	// An upgrade runs the Job again over the existing key (an earlier release's, or the replicas'
	// own before the key-maker): it is left byte for byte, so placeholders sealed with it hold.
	if made, err := seal.MakeKey(ctx, maker, ns, name); err != nil || made {
		t.Fatalf("the key-maker's second run: made %v, %v; want the key left", made, err)
	}
	again, err := kube().CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || string(again.Data[seal.KeyField]) != string(first.Data[seal.KeyField]) || again.ResourceVersion != first.ResourceVersion {
		t.Fatalf("the key changed on the key-maker's second run: %v", err)
	}

	token := asDriverset(t)
	secrets := token.CoreV1().Secrets(ns)
	for _, tc := range []struct {
		attack string
		do     func() error
	}{
		{"get the key", func() error {
			s, err := secrets.Get(ctx, name, metav1.GetOptions{})
			if err == nil {
				t.Logf("read %d bytes of key", len(s.Data[seal.KeyField]))
			}
			return err
		}},
		{"list the Secrets of driverset's namespace", func() error {
			_, err := secrets.List(ctx, metav1.ListOptions{})
			return err
		}},
		{"watch the key", func() error {
			w, err := secrets.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{"replace the key with one of its own", func() error {
			_, err := secrets.Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Data: map[string][]byte{seal.KeyField: make([]byte, seal.MinKeyLen)}}, metav1.UpdateOptions{})
			return err
		}},
		{"delete the key, to plant its own while it is absent", func() error {
			return secrets.Delete(ctx, name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		}},
		// The test bed's driverset runs with the base RBAC (no self-managed TLS, whose CA Secret
		// needs create: with it, driverset-guard-secrets refuses this,
		// TestDriversetTokenCannotPlantTheSealKey).
		{"make a key of its own", func() error {
			_, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "driverset-seal-planted", Namespace: ns},
				Data: map[string][]byte{seal.KeyField: make([]byte, seal.MinKeyLen)}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}},
	} {
		t.Run(tc.attack, func(t *testing.T) {
			if err := tc.do(); !apierrors.IsForbidden(err) {
				t.Errorf("driverset's token: %v, want Forbidden", err)
			}
		})
	}
}

// Issue 35, attack: with self-managed TLS (the default install) driverset's token may create
// Secrets in its namespace, for its CA, and RBAC cannot say which: while the seal key's Secret is
// absent (a fresh install before the Job ran, a rotation between the delete and the next Job) the
// token could make it with a key of its own, which every replica then reads. The guard rail
// driverset-guard-secrets lets it create its CA Secret and nothing else. Before (the old
// manifests): the create of the seal key was admitted. Server-side dry runs: nothing is planted
// if one is let through.
func TestDriversetTokenCannotPlantTheSealKey(t *testing.T) {
	ctx := context.Background()
	ns := systemNamespace
	applySelfManagedRBAC(t) // create on Secrets of driverset's namespace, as the default install grants it
	if err := kube().CoreV1().Secrets(ns).Delete(ctx, seal.SecretName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	secrets := asDriverset(t).CoreV1().Secrets(ns)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	secret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Data: map[string][]byte{seal.KeyField: make([]byte, seal.MinKeyLen)}}
	}
	for _, name := range []string{seal.SecretName, "driverset-seal-planted"} {
		t.Run("plant "+name, func(t *testing.T) {
			if _, err := secrets.Create(ctx, secret(name), dry); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "driverset-guard-secrets") {
				t.Errorf("driverset's token creates Secret %s: %v, want refused by driverset-guard-secrets", name, err)
			}
		})
	}
	// Its own CA Secret is still made (AlreadyExists: a self-managed run before this one left it,
	// and the create got past admission to the store).
	t.Run("its CA Secret", func(t *testing.T) {
		ca := secret(caSecretName)
		ca.Data = nil
		if _, err := secrets.Create(ctx, ca, dry); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("driverset's token creates its CA Secret %s: %v, want admitted", ca.Name, err)
		}
	})
}
