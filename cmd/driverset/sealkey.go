package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/driverset/driverset/seal"
)

// sealKeyPoll is how often a replica looks at its key file: while it waits for the kubelet to
// bring the Secret, and then for a rotated key.
const sealKeyPoll = 2 * time.Second

// waitForSealKey returns once keys holds a key, serving meanwhile on the probe address a /healthz
// that passes and a /readyz that fails: a replica is alive but not ready until the kubelet has
// brought the Secret into its volume. Nothing else starts before, so no webhook seals and no
// controller judges a seal without the key.
func waitForSealKey(ctx context.Context, f serveFlags, keys *seal.KeyFile) error {
	if _, err := keys.Load(); err == nil {
		return nil
	}
	log := ctrl.Log.WithName("seal-key")
	checks := newProbes()
	checks.healthz["ping"] = healthz.Ping
	checks.readyz["seal-key"] = keys.Ready
	srv, err := plainServer("health probe (waiting for the seal key)", f.probeAddr, checks.handler())
	if err != nil {
		return err
	}
	waitCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	if srv != nil {
		go func() { served <- srv.Start(waitCtx) }()
	} else {
		served <- nil
	}
	started := time.Now()
	err = keys.Wait(ctx, sealKeyPoll, func(err error) { log.Info("not ready until the key is there", "reason", err.Error()) })
	stop()
	if serr := <-served; err == nil && serr != nil {
		err = serr
	}
	if err == nil {
		log.Info("seal key read", "file", keys.Path(), "waited", time.Since(started).Round(time.Millisecond).String())
	}
	return err
}

// watchSealKey reads the key file again until ctx ends: a rotated key is sealed and checked with
// as soon as the kubelet brings it.
func watchSealKey(ctx context.Context, keys *seal.KeyFile) {
	log := ctrl.Log.WithName("seal-key")
	keys.Watch(ctx, sealKeyPoll,
		func() {
			log.Info("a new seal key read: placeholders sealed with the old one are no longer built", "file", keys.Path())
		},
		func(err error) { log.V(1).Info("sealing with the last key read", "reason", err.Error()) })
}

// makeSealKey is `driverset make-seal-key`: the Secret that seals placeholders made with a random
// key unless it exists. The install's Job runs it as a ServiceAccount of its own that may only
// create Secrets in driverset's namespace; driverset's token may neither make nor read the key.
func makeSealKey(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("make-seal-key", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var kubeconfig, ns, name string
	fs.StringVar(&kubeconfig, "kubeconfig", "", "the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
	fs.StringVar(&ns, "namespace", os.Getenv("POD_NAMESPACE"), "driverset's namespace (default: $POD_NAMESPACE)")
	fs.StringVar(&name, "secret", seal.SecretName, "the Secret to make")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if ns == "" {
		fmt.Fprintln(stderr, "driverset make-seal-key: no namespace (set --namespace or $POD_NAMESPACE)")
		return 2
	}
	c, err := kubeClient(kubeconfig, "driverset-make-seal-key")
	if err != nil {
		fmt.Fprintln(stderr, "driverset make-seal-key:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	made, err := seal.MakeKey(ctx, c, ns, name)
	if err != nil {
		fmt.Fprintln(stderr, "driverset make-seal-key:", err)
		return 1
	}
	if made {
		fmt.Fprintf(stdout, "Secret %s/%s made with a new key\n", ns, name)
	} else {
		fmt.Fprintf(stdout, "Secret %s/%s exists: left as it is\n", ns, name)
	}
	return 0
}
