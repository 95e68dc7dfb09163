package harness

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"

	"github.com/driverset/driverset/seal"
)

// sealKeyFile is the key file o's replica reads: o.SealKeyFile, or the cluster's own beside its
// kubeconfig (else in o.Dir), made once with a random key. The harness plays both the install's key-maker (a key
// made only when there is none) and the kubelet (the file the Secret volume would hold): the file
// path is the one interface between driverset and how the key arrives.
func sealKeyFile(o Options) (string, error) {
	if o.SealKeyFile != "" {
		return o.SealKeyFile, nil
	}
	// Beside the cluster's kubeconfig, so that every replica of one cluster shares it; a replica
	// started without one (no cluster to share with) keeps its own in its folder.
	dir := o.Dir
	if o.Kubeconfig != "" {
		dir = filepath.Dir(o.Kubeconfig)
	}
	if dir == "" {
		return "", errors.New("no kubeconfig and no folder to keep the seal key in")
	}
	path := filepath.Join(dir, "driverset-"+seal.KeyField)
	key := make([]byte, seal.MinKeyLen)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return path, nil
	}
	if err != nil {
		return "", err
	}
	if _, err := f.Write(key); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}
