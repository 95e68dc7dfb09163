package seal

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// KeyField is the Secret's data key that holds the sealing key, and the name of the file the
// Secret volume gives the replicas.
const KeyField = "hmac-key"

// FieldManager names the key-maker as the Secret's writer (its managedFields say who made it).
const FieldManager = "driverset-make-seal-key"

// MakeKey creates Secret name in ns with a random key, unless it exists: it reports whether it
// made one. It only ever creates, so the key-maker's ServiceAccount needs no read of the Secret,
// and an existing key (an upgrade's: placeholders sealed with it stay valid) is never changed.
// driverset's own token may not create it (docs/design.md#sealed-placeholders).
func MakeKey(ctx context.Context, c kubernetes.Interface, ns, name string) (bool, error) {
	if ns == "" {
		return false, fmt.Errorf("the placeholder sealing key: no namespace for Secret %s (set $POD_NAMESPACE or --namespace)", name)
	}
	key := make([]byte, MinKeyLen)
	if _, err := rand.Read(key); err != nil {
		return false, err
	}
	_, err := c.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/name": "driverset"}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{KeyField: key},
	}, metav1.CreateOptions{FieldManager: FieldManager})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsAlreadyExists(err):
		return false, nil
	}
	return false, fmt.Errorf("the placeholder sealing key (Secret %s/%s): %w", ns, name, err)
}
