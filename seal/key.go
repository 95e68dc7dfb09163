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

// KeyField is the Secret's data key that holds the sealing key.
const KeyField = "hmac-key"

// LoadKey returns the sealing key from Secret name in ns, creating the Secret with a random key
// when it does not exist yet. Every replica reads the same Secret: the first to start makes it,
// one that loses the race to create reads the winner's.
func LoadKey(ctx context.Context, c kubernetes.Interface, ns, name string) ([]byte, error) {
	if ns == "" {
		return nil, fmt.Errorf("the placeholder sealing key: no namespace for Secret %s (set $POD_NAMESPACE or --leader-election-namespace)", name)
	}
	secrets := c.CoreV1().Secrets(ns)
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		key := make([]byte, MinKeyLen)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		s, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{KeyField: key},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			s, err = secrets.Get(ctx, name, metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the placeholder sealing key (Secret %s/%s): %w", ns, name, err)
	}
	key := s.Data[KeyField]
	if len(key) < MinKeyLen {
		return nil, fmt.Errorf("the placeholder sealing key (Secret %s/%s): %s holds %d bytes, want at least %d", ns, name, KeyField, len(key), MinKeyLen)
	}
	return key, nil
}
