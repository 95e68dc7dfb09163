package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/driverset/driverset/uninstall"
	"github.com/driverset/driverset/version"
)

// uninstallCleanup is `driverset uninstall-cleanup`: the finalizer driverset.dev/outcome taken off
// what would wait for driverset forever once it is gone (package uninstall says what, and what not).
// The chart's pre-delete hook runs it; a kustomize install runs it by hand (docs/install.md).
func uninstallCleanup(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("uninstall-cleanup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o uninstall.Options
	var kubeconfig, namespaces string
	fs.StringVar(&kubeconfig, "kubeconfig", "", "the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
	fs.StringVar(&namespaces, "namespaces", "", "comma-separated namespaces to release in (default: every namespace)")
	fs.BoolVar(&o.TerminatingOnly, "terminating-only", false,
		"release only pods being deleted and keep the StatefulSet templates: a drain while driverset is down and will come back")
	fs.BoolVar(&o.DryRun, "dry-run", false, "report what would be released, change nothing")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	ns, err := watchNamespaces(namespaces)
	if err != nil {
		fmt.Fprintln(stderr, "driverset uninstall-cleanup:", err)
		return 2
	}
	o.Namespaces = ns
	c, err := kubeClient(kubeconfig, "driverset-uninstall-cleanup")
	if err != nil {
		fmt.Fprintln(stderr, "driverset uninstall-cleanup:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	acts, err := uninstall.Run(ctx, c, o)
	prefix := ""
	if o.DryRun {
		prefix = "(dry run) "
	}
	for _, a := range acts {
		fmt.Fprintln(stdout, prefix+a.String())
	}
	fmt.Fprintf(stdout, "%s%d object(s) released or left alone\n", prefix, len(acts))
	if err != nil {
		fmt.Fprintln(stderr, "driverset uninstall-cleanup:", err)
		return 1
	}
	return 0
}

// kubeClient builds a client the way kubectl does: in a pod (a Job), the in-cluster config; agent
// names the caller in the apiserver's audit log.
func kubeClient(kubeconfig, agent string) (kubernetes.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = agent + "/" + version.Get().Version
	return kubernetes.NewForConfig(cfg)
}
