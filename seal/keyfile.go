package seal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"
)

// SecretName is the Secret that holds the sealing key in driverset's namespace: made by
// `driverset make-seal-key` (the install's Job), mounted by the replicas.
const SecretName = "driverset-seal"

// DefaultKeyFile is where the install mounts the Secret driverset-seal (its key KeyField): serve's
// --seal-key-file default, which e2e/install checks every install flavour against.
const DefaultKeyFile = "/etc/driverset/seal/" + KeyField

// KeyFile is the sealing key as the replicas get it: a file of a Secret volume, which the kubelet
// fills with its own credentials (driverset's token may not read the Secret), brings some time
// after the Secret is made, and replaces when the Secret changes. It holds the last good key read.
type KeyFile struct {
	path string

	mu  sync.RWMutex
	key []byte
}

// NewKeyFile is the key at path, not read yet.
func NewKeyFile(path string) *KeyFile { return &KeyFile{path: path} }

// Path is the file read.
func (k *KeyFile) Path() string { return k.path }

// Load reads the file and keeps its key when it is one: it reports whether the key changed. A file
// missing or too short is an error and leaves the last good key in place (a Secret deleted to be
// rotated seals on with the old key until the next one is there).
func (k *KeyFile) Load() (bool, error) {
	b, err := os.ReadFile(k.path)
	if errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("the placeholder sealing key: no file %s yet (the Secret not made yet, or not brought by the kubelet yet)", k.path)
	}
	if err != nil {
		return false, fmt.Errorf("the placeholder sealing key: %w", err)
	}
	if len(b) < MinKeyLen {
		return false, fmt.Errorf("the placeholder sealing key: %s holds %d bytes, want at least %d", k.path, len(b), MinKeyLen)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if bytes.Equal(b, k.key) {
		return false, nil
	}
	k.key = b
	return true, nil
}

// Key is the last good key read, or nil before one.
func (k *KeyFile) Key() []byte {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.key
}

// Ready is a readiness check: nil once a key is loaded.
func (k *KeyFile) Ready(*http.Request) error {
	if k.Key() == nil {
		return fmt.Errorf("no placeholder sealing key read from %s yet", k.path)
	}
	return nil
}

// Wait loads the key every interval until there is one, or ctx ends; waiting is told once.
func (k *KeyFile) Wait(ctx context.Context, interval time.Duration, waiting func(error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	told := false
	for {
		_, err := k.Load()
		if k.Key() != nil {
			return nil
		}
		if !told && waiting != nil {
			waiting(err)
			told = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Watch reads the file again every interval until ctx ends, telling changed of each new key and
// failed of each read that keeps the old one. Polled, not watched with inotify: the kubelet swaps
// a symlink of the volume's folder, and a poll of a 32-byte file every few seconds costs nothing.
func (k *KeyFile) Watch(ctx context.Context, interval time.Duration, changed func(), failed func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c, err := k.Load()
		if err != nil && failed != nil {
			failed(err)
		}
		if c && changed != nil {
			changed()
		}
	}
}
