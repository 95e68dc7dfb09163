package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/driverset/driverset/certs"
	"github.com/driverset/driverset/controller"
	"github.com/driverset/driverset/convert"
	"github.com/driverset/driverset/seal"
	"github.com/driverset/driverset/version"
	"github.com/driverset/driverset/webhook"
)

type serveFlags struct {
	kubeconfig        string
	webhookHost       string
	webhookPort       int
	certDir           string
	metricsAddr       string
	metricsSecure     bool
	probeAddr         string
	leaderElect       bool
	leaderElectionNS  string
	image             string
	imagePullPolicy   string
	restartBackoff    time.Duration
	maxRestartBackoff time.Duration
	fenceAfter        time.Duration
	fenceBounds       controller.Bounds
	fenceNamespaces   string
	selfManagedCerts  bool
	caSecret          string
	webhookService    string
	webhookConfig     string
	certExtraHosts    string
	certInterval      time.Duration
	logLevel          string
	workers           int
	maxAdmissions     int
	maxAdmissionBytes int64
	admissionTimeout  time.Duration
	sealKeyFile       string
	authorizeExtended bool
	clientCA          string
	clientNames       string
	pprofAddr         string
	watchNamespaces   []string
	// excludedNamespaces are skipped by the webhooks (with driverset's own: servedBy).
	excludedNamespaces []string
	// includedNamespaces, when set, are the only namespaces the webhooks' selector lets through
	// (the chart's webhook.includedNamespaces): the others are not served (servedBy).
	includedNamespaces []string
	zap                zap.Options
}

func parseServeFlags(args []string) (serveFlags, error) {
	var f serveFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, or $KUBECONFIG)")
	fs.StringVar(&f.webhookHost, "webhook-host", "", "address the webhook server listens on (default: all)")
	fs.IntVar(&f.webhookPort, "webhook-port", 9443, "port of the webhook server")
	fs.StringVar(&f.certDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "folder with tls.crt and tls.key; reloaded when they change")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "address of the metrics endpoint; 0 turns it off")
	fs.BoolVar(&f.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS, to callers the apiserver authenticates (TokenReview) and authorizes for GET on the /metrics URL (SubjectAccessReview: ClusterRole driverset-metrics-reader); false: plain HTTP to anyone")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; 0 turns it off")
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "elect one controller among the replicas (every replica serves the webhook)")
	fs.StringVar(&f.leaderElectionNS, "leader-election-namespace", "", "namespace of the leader-election Lease (default: the pod's own namespace)")
	fs.StringVar(&f.image, "image", "", "driverset's own image, run by the init container that brings `driverset wrap` into driver pods (default: read from this pod, named by $POD_NAME in $POD_NAMESPACE)")
	fs.StringVar(&f.imagePullPolicy, "image-pull-policy", string(corev1.PullIfNotPresent), "pull policy of that init container")
	fs.DurationVar(&f.restartBackoff, "restart-backoff", 10*time.Second, "delay before the first restart of a failed driver; doubles with each restart")
	fs.DurationVar(&f.maxRestartBackoff, "max-restart-backoff", 5*time.Minute, "longest delay between restarts")
	fs.DurationVar(&f.fenceAfter, "fence-after", 0, "force-delete a driver pod whose node has been unreachable this long (0: never; a driver's driverset.dev/fence-after annotation wins)")
	fs.DurationVar(&f.fenceBounds.FenceAfterMin, "fence-after-min", 10*time.Second, "the least fence-after a driver may ask for; a smaller one is raised to it, with a warning")
	fs.DurationVar(&f.fenceBounds.FenceAfterMax, "fence-after-max", 0, "the most fence-after a driver may ask for (0: no ceiling)")
	fs.DurationVar(&f.fenceBounds.SelfFenceMin, "self-fence-min", 10*time.Second, "the least self-fence T a driver may ask for (driverset.dev/self-fence)")
	fs.DurationVar(&f.fenceBounds.SelfFenceMax, "self-fence-max", 10*time.Minute, "the most self-fence T a driver may ask for (0: no ceiling)")
	fs.StringVar(&f.fenceNamespaces, "fence-namespaces", "", "comma-separated namespaces whose drivers may be fenced at all, by fence-after or self-fence (empty: every namespace)")
	fs.BoolVar(&f.selfManagedCerts, "self-managed-tls", false, "make and rotate the webhook's CA and serving certificates (no cert-manager); they go to --cert-dir")
	fs.StringVar(&f.caSecret, "ca-secret", "driverset-ca", "with --self-managed-tls: the Secret, in this pod's namespace, that holds the CA")
	fs.StringVar(&f.webhookService, "webhook-service", "driverset-webhook", "with --self-managed-tls: the webhook's Service (the serving certificate's name)")
	fs.StringVar(&f.webhookConfig, "webhook-config", "driverset", "with --self-managed-tls: the MutatingWebhookConfiguration whose caBundle driverset keeps")
	fs.StringVar(&f.certExtraHosts, "webhook-cert-extra-hosts", "", "with --self-managed-tls: more names or IPs for the serving certificate, comma-separated")
	fs.DurationVar(&f.certInterval, "cert-check-interval", 30*time.Second, "with --self-managed-tls: how often each replica checks the CA Secret and the caBundle; a CA rotation takes about 8 of these")
	fs.StringVar(&f.logLevel, "log-level", "info", "what to log: debug, info or error (zap's --zap-log-level, when given, wins)")
	fs.IntVar(&f.workers, "workers", 16, "placeholders reconciled at once: an app whose step is slow or failing holds one worker, not every app; many drivers on one lost node are force-deleted this many at a time")
	fs.IntVar(&f.maxAdmissions, "max-concurrent-admissions", 32, "admission requests handled at once by this replica; more wait, their bodies read, until one ends or the apiserver's webhook timeout (a slot is held only while a request is handled, never while its body is read or its answer written)")
	fs.Int64Var(&f.maxAdmissionBytes, "max-admission-bytes", 8<<20, "a request larger than 64 KiB (or than this over --max-concurrent-admissions, when less) also takes its size from a budget of this many bytes before its body is read (each costs about five times its size while handled): large ones run a few at once, without holding the slots of small ones")
	fs.DurationVar(&f.admissionTimeout, "admission-io-timeout", webhook.DefaultTimeout, "how long a caller has to send an admission request's body once its headers are in, and to take the answer; neither holds a slot of --max-concurrent-admissions")
	fs.StringVar(&f.sealKeyFile, "seal-key-file", seal.DefaultKeyFile, "the file holding the key that seals placeholders: the Secret driverset-seal mounted as a volume (made by driverset make-seal-key); not ready until it is there, read again when it changes")
	fs.BoolVar(&f.authorizeExtended, "authorize-extended-resources", false, "admit an opted-in driver that asks for an extended resource (anything but cpu, memory, ephemeral-storage, hugepages-*: a GPU) only when its submitter may \"use\" that resource (resourceName) on extendedresources.driverset.dev in the pod's namespace, asked with a SubjectAccessReview; off: whoever may create the pod may ask for any, as without driverset")
	fs.StringVar(&f.clientCA, "webhook-client-ca", "", "PEM file of the CA that signs the kube-apiserver's webhook client certificate: the admission handlers then refuse any caller without one (empty: off)")
	fs.StringVar(&f.clientNames, "webhook-client-names", "", "with --webhook-client-ca: the common names a client certificate may have, comma-separated (empty: any the CA signed)")
	fs.StringVar(&f.pprofAddr, "pprof-bind-address", "0", "address of Go's /debug/pprof profiles, e.g. 127.0.0.1:6060 (reached with kubectl port-forward); unauthenticated, so keep it on localhost; 0 turns it off")
	watch := fs.String("watch-namespaces", "", "comma-separated namespaces: the only ones driverset caches and acts in (the namespaced install: its RBAC binds it there only); empty: every namespace")
	included := fs.String("included-namespaces", "", "comma-separated namespaces its webhooks' namespaceSelector is limited to (the chart's webhook.includedNamespaces): a review about any other is refused (or, for executors, left alone) before anything is read for it; the caches are not limited (that is --watch-namespaces); empty: no such limit")
	excluded := fs.String("excluded-namespaces", "kube-system", "comma-separated namespaces its webhooks' namespaceSelector skips (the chart's webhook.excludedNamespaces), besides driverset's own: a review about one is refused (or, for executors, left alone) before anything is read for it; empty: only driverset's own")
	f.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	var err error
	if f.watchNamespaces, err = watchNamespaces(*watch); err != nil {
		return f, err
	}
	if f.excludedNamespaces, err = namespaceList("--excluded-namespaces", *excluded); err != nil {
		return f, err
	}
	if f.includedNamespaces, err = namespaceList("--included-namespaces", *included); err != nil {
		return f, err
	}
	if err := f.applyLogLevel(fs); err != nil {
		return f, err
	}
	if f.fenceNamespaces != "" {
		f.fenceBounds.Namespaces = strings.Split(f.fenceNamespaces, ",")
	}
	if f.image == "" && (os.Getenv("POD_NAME") == "" || os.Getenv("POD_NAMESPACE") == "") {
		return f, errors.New("--image is required outside a pod: the image the driver pods' init container copies the driverset binary from")
	}
	return f, nil
}

// logLevel is the zap level of a --log-level value. zap logs logr's V(1) at its debug level.
func logLevel(name string) (zapcore.Level, bool) {
	switch name {
	case "debug":
		return zapcore.DebugLevel, true
	case "info":
		return zapcore.InfoLevel, true
	case "error":
		return zapcore.ErrorLevel, true
	}
	return 0, false
}

// applyLogLevel sets the logger's level from --log-level, unless zap's own --zap-log-level was
// given, or --zap-devel without an explicit --log-level (development mode then logs debug).
func (f *serveFlags) applyLogLevel(fs *flag.FlagSet) error {
	level, ok := logLevel(f.logLevel)
	if !ok {
		return fmt.Errorf("--log-level %q: want debug, info or error", f.logLevel)
	}
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	if !given["zap-log-level"] && (given["log-level"] || !f.zap.Development) {
		f.zap.Level = level
	}
	return nil
}

// newLogger is serve's logger, written to w: JSON unless zap's flags say otherwise.
func newLogger(f serveFlags, w io.Writer) logr.Logger {
	return zap.New(zap.UseFlagOptions(&f.zap), zap.WriteTo(w))
}

// serve runs the webhook (on every replica) and the controller (on the leader) until ctx ends.
func serve(ctx context.Context, args []string) error {
	f, err := parseServeFlags(args)
	if err != nil {
		return err
	}
	ctrl.SetLogger(newLogger(f, os.Stderr))
	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return err
	}
	if f.image == "" {
		if f.image, err = ownImage(ctx, cfg, os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")); err != nil {
			return err
		}
	}
	keys := seal.NewKeyFile(f.sealKeyFile)
	if err := waitForSealKey(ctx, f, keys); err != nil {
		return err
	}
	go watchSealKey(ctx, keys)
	sealer := seal.Sealer{Keys: keys}
	callers, err := webhookCallers(f)
	if err != nil {
		return err
	}
	ctrl.Log.Info(webhookCallersNote(f))
	// Placeholders have their own cache (controller.CacheOptions says why); the manager's client and
	// the webhooks read pods from both.
	// In a namespaced install both watch the watched namespaces only.
	placeholders, err := cache.New(cfg, watched(controller.PlaceholderCacheOptions(), f.watchNamespaces))
	if err != nil {
		return err
	}
	// Spark's executor StatefulSets carry no label to select them by: a cache of every
	// StatefulSet's metadata, and of the claims labelled as driverset's (the executor claims
	// drivers make), each cut to a fixed shape (controller.ExecutorSetCacheOptions).
	executorSets, err := cache.New(cfg, watched(controller.ExecutorSetCacheOptions(), f.watchNamespaces))
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Cache: watched(controller.CacheOptions(), f.watchNamespaces),
		NewClient: func(cfg *rest.Config, o client.Options) (client.Client, error) {
			o.Cache.Reader = controller.Pods{Main: o.Cache.Reader, Placeholders: placeholders}
			return client.New(cfg, o)
		},
		Metrics:                 metricsOptions(f),
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        "driverset.driverset.dev",
		LeaderElectionNamespace: f.leaderElectionNS,
		// Shorter than the default lease so a new leader takes over a dead one's drivers quickly.
		LeaseDuration: ptr(15 * time.Second),
		RenewDeadline: ptr(10 * time.Second),
		RetryPeriod:   ptr(2 * time.Second),
		WebhookServer: crwebhook.NewServer(webhookOptions(f, callers)),
	})
	if err != nil {
		return err
	}

	// The probes' checks, served once all are added (at the end).
	checks := newProbes()
	var activeCA func() *x509.Certificate
	if f.selfManagedCerts {
		cm, err := selfManagedCerts(ctx, mgr, cfg, f, checks)
		if err != nil {
			return err
		}
		activeCA = cm.ActiveCA
	}
	metrics, err := registerMetrics(ctrlmetrics.Registry, mgr.Elected(), placeholders, webhookAddr(f), activeCA)
	if err != nil {
		return err
	}
	if err := mgr.Add(controller.PlaceholderCache{Cache: placeholders}); err != nil {
		return err
	}
	if err := mgr.Add(controller.PlaceholderCache{Cache: executorSets}); err != nil {
		return err
	}
	pods := controller.Pods{Main: mgr.GetCache(), Placeholders: placeholders}
	hooks := mgr.GetWebhookServer()
	// One limit for the eight entries: they share the replica's memory.
	limit := webhook.NewLimiter(f.maxAdmissions, f.maxAdmissionBytes)
	limit.Timeout = f.admissionTimeout
	// Each entry's answers are counted and logged (webhook.Observed) under its name; only the
	// apiserver's calls reach them (callers), and only reviews about the namespaces served.
	entry := func(name string, served webhook.Served) http.Handler {
		return admissionEntry(callers, limit, &admission.Webhook{Handler: webhook.Observed{Webhook: name, Handler: served, Decisions: metrics.admissions}})
	}
	observed := func(name string, h admission.Handler) http.Handler {
		return entry(name, servedBy(f, h, false))
	}
	authorize, err := extendedResourceAuthorizer(cfg, f)
	if err != nil {
		return err
	}
	hooks.Register(webhook.DriverPath, observed("driver", &webhook.Driver{LimitRanges: mgr.GetCache(), Seal: sealer, Authorize: authorize}))
	hooks.Register(webhook.DriverEnforcedPath, observed("driver-enforced", &webhook.Driver{Enforced: true, LimitRanges: mgr.GetCache(), Seal: sealer, Authorize: authorize}))
	// Executors and new incarnations are looked up in the informer caches, never with a live call.
	// The executors entry fails open, so it passes a review about a namespace it does not serve.
	hooks.Register(webhook.ExecutorPath, entry("executor", servedBy(f, &webhook.Executor{Reader: pods}, true)))
	hooks.Register(webhook.IncarnationPath, observed("incarnation", &webhook.Incarnation{Reader: pods, Sets: executorSets}))
	r := &controller.Placeholder{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		ExecutorSets: executorSets,
		Events:       controller.LoggedEvents(mgr.GetEventRecorder("driverset.dev/controller"), ctrl.Log.WithName("placeholder")),
		Convert:      convert.Options{Image: f.image, ImagePullPolicy: corev1.PullPolicy(f.imagePullPolicy)},
		Budget:       controller.Budget{Backoff: f.restartBackoff, MaxBackoff: f.maxRestartBackoff},
		FenceAfter:   f.fenceAfter,
		Bounds:       f.fenceBounds,
		Heartbeats:   controller.NewHeartbeats(nil),
		Metrics:      metrics.controller,
		Seal:         sealer,
	}
	// Every StatefulSet and Service driverset's ServiceAccount creates is checked against the
	// controller's own builder, on every replica (docs/design.md#what-a-create-may-be).
	hooks.Register(webhook.CreatesPath, observed("creates", &webhook.Creates{Pods: mgr.GetAPIReader(), Builder: r}))
	// And every Event it records must be about one of its placeholders (read live, as above).
	hooks.Register(webhook.EventsPath, observed("events", &webhook.Events{Pods: mgr.GetAPIReader()}))
	// And every driver pod it removes without its kubelet (grace 0) only on the proof its fence
	// takes, read on the answering replica as the controller reads it before a fence
	// (docs/design.md#what-a-force-delete-may-be).
	hooks.Register(webhook.DeletesPath, observed("deletes", &webhook.Deletes{Proof: r}))
	// And takes its finalizer off a driver pod or placeholder only when the controller would let
	// it go itself, read as the Outcomes reconciler reads it
	// (docs/design.md#what-a-finalizer-release-may-be).
	hooks.Register(webhook.ReleasesPath, observed("releases", &webhook.Releases{Proof: r}))
	if err := r.SetupWithManager(ctx, mgr, placeholders, f.workers); err != nil {
		return err
	}
	if err := (&controller.Orphans{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&controller.Outcomes{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(mgr); err != nil {
		return err
	}
	checks.healthz["ping"] = healthz.Ping
	// Ready means the webhook server is up and serving its certificate.
	checks.readyz["webhook"] = hooks.StartedChecker()
	// And a sealing key read (always true by now: waitForSealKey), listed with the others.
	checks.readyz["seal-key"] = keys.Ready
	// Ready also means the informer caches the webhooks read are filled: before that the
	// incarnations webhook (failurePolicy Fail) would find no executors and executors no driver.
	checks.readyz["informer-caches"] = cachesSynced(mgr.GetCache(), placeholders, executorSets)
	// The driver webhook reads LimitRanges from the cache, the creates webhook StatefulSets too
	// (the names and seal of an app, as the controller reads them), and the deletes webhook Nodes
	// (a lost node's zone): have those informers started with it, on replicas that do not lead as
	// well.
	for _, obj := range []client.Object{&corev1.LimitRange{}, &appsv1.StatefulSet{}, &corev1.Node{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return err
		}
	}
	// And the incarnations webhook Spark's executor StatefulSets.
	if _, err := executorSets.GetInformer(ctx, convert.ExecutorSetObject()); err != nil {
		return err
	}
	for _, s := range []struct {
		name, addr string
		h          http.Handler
	}{{"health probe", f.probeAddr, checks.handler()}, {"pprof", f.pprofAddr, pprofHandler()}} {
		srv, err := plainServer(s.name, s.addr, s.h)
		if err != nil {
			return err
		}
		if srv != nil {
			if err := mgr.Add(srv); err != nil {
				return err
			}
		}
	}
	return mgr.Start(ctx)
}

// selfManagedCerts makes the serving certificate before the webhook server starts (it will not
// start without one), keeps it and the caBundle current on every replica, and makes readiness
// mean "serving the current certificate".
func selfManagedCerts(ctx context.Context, mgr ctrl.Manager, cfg *rest.Config, f serveFlags, checks *probes) (*certs.Manager, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ns := ownNamespace(f)
	var extra []string
	if f.certExtraHosts != "" {
		extra = strings.Split(f.certExtraHosts, ",")
	}
	cm, err := certs.NewManager(certs.Options{
		Client: cs, Namespace: ns, SecretName: f.caSecret, ServiceName: f.webhookService,
		WebhookConfigName: f.webhookConfig, CertDir: f.certDir, ExtraHosts: extra, Interval: f.certInterval,
	})
	if err != nil {
		return nil, err
	}
	if err := cm.EnsureOnce(ctrl.LoggerInto(ctx, ctrl.Log)); err != nil {
		return nil, fmt.Errorf("webhook certificates: %w", err)
	}
	if err := mgr.Add(cm); err != nil {
		return nil, err
	}
	checks.readyz["webhook-certificate"] = cm.ServingCurrent(webhookAddr(f))
	return cm, nil
}

// webhookAddr is where this replica's webhook server is reached from the replica itself.
func webhookAddr(f serveFlags) string {
	host := f.webhookHost
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(f.webhookPort))
}

// servedBy answers with h the reviews about the namespaces driverset serves: the watched ones (none:
// all), never the excluded ones nor its own (webhook.Served); pass leaves the others alone.
func servedBy(f serveFlags, h admission.Handler, pass bool) webhook.Served {
	return webhook.Served{Namespaces: f.watchNamespaces, Included: f.includedNamespaces, Excluded: append(slices.Clone(f.excludedNamespaces), ownNamespace(f)), Handler: h, Pass: pass}
}

// ownNamespace is driverset's own namespace: the pod's, or the leader election's outside a pod.
func ownNamespace(f serveFlags) string {
	if v := os.Getenv("POD_NAMESPACE"); v != "" {
		return v
	}
	return f.leaderElectionNS
}

// webhookCallersNote says at start who may call the admission handlers: an admin who left it open
// reads so in the log, with where to close it.
func webhookCallersNote(f serveFlags) string {
	switch {
	case f.clientCA == "":
		return "webhook callers: anyone who reaches the webhook port is answered (no --webhook-client-ca); " +
			"to serve the kube-apiserver alone see docs/install.md#only-the-apiserver-calls-the-webhook"
	case f.clientNames == "":
		return "webhook callers: only client certificates signed by the CA in " + f.clientCA
	default:
		return "webhook callers: only client certificates signed by the CA in " + f.clientCA + " named " + f.clientNames
	}
}

// webhookCallers is who may call the admission handlers: anyone, or with --webhook-client-ca
// only a client certificate of that CA (see webhook.Callers).
func webhookCallers(f serveFlags) (webhook.Callers, error) {
	if f.clientCA == "" {
		return webhook.Callers{}, nil
	}
	var names []string
	if f.clientNames != "" {
		names = strings.Split(f.clientNames, ",")
	}
	return webhook.LoadCallers(f.clientCA, names)
}

// extendedResourceAuthorizer is the driver webhooks' Authorize: SubjectAccessReviews with
// --authorize-extended-resources, nil (nothing asked) without.
func extendedResourceAuthorizer(cfg *rest.Config, f serveFlags) (webhook.Authorizer, error) {
	if !f.authorizeExtended {
		return nil, nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return webhook.SubjectAccessReviews{Client: cs.AuthorizationV1().SubjectAccessReviews()}, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return ctrl.GetConfig()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	// As ctrl.GetConfig does in a pod: no client-side rate limit (client-go's default is 5
	// requests/s), the apiserver's priority and fairness is the limit. Otherwise a new leader
	// working through a backlog of drivers is throttled only when run with --kubeconfig.
	if cfg.QPS == 0 {
		cfg.QPS = -1
	}
	return cfg, nil
}

// ownImage is the image of the driverset container of this pod.
func ownImage(ctx context.Context, cfg *rest.Config, ns, name string) (string, error) {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return "", err
	}
	var pod corev1.Pod
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
		return "", fmt.Errorf("reading this pod to learn driverset's image (or set --image): %w", err)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == "driverset" {
			return c.Image, nil
		}
	}
	return "", fmt.Errorf("pod %s/%s has no container named driverset; set --image", ns, name)
}

// serveMetrics are the metrics that serve hands to the webhooks and the controller.
type serveMetrics struct {
	controller *controller.Metrics
	admissions *webhook.Decisions
}

// registerMetrics registers driverset's metrics on reg (controller-runtime's registry, served at
// --metrics-bind-address): the build that runs, the controller's, the admission decisions, the
// drivers by state (placeholders, once elected closes, at scrape time) and the expiry of the
// certificate the webhook server at webhookAddr presents (and of the CA, when activeCA is set).
func registerMetrics(reg prometheus.Registerer, elected <-chan struct{}, placeholders client.Reader, webhookAddr string,
	activeCA func() *x509.Certificate) (serveMetrics, error) {
	var m serveMetrics
	collectors := []prometheus.Collector{
		version.Collector(version.Get()),
		controller.NewDriverStates(placeholders, elected),
		certs.NewExpiry(webhookAddr, activeCA),
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return m, err
		}
	}
	var err error
	if m.controller, err = controller.NewMetrics(reg); err != nil {
		return m, err
	}
	m.admissions, err = webhook.NewDecisions(reg)
	return m, err
}

func ptr[T any](v T) *T { return &v }

// cacheSyncer is what cachesSynced needs of controller-runtime's cache.
type cacheSyncer interface {
	WaitForCacheSync(ctx context.Context) bool
}

// cacheSyncProbeWait bounds how long one readiness probe waits for the caches.
const cacheSyncProbeWait = 200 * time.Millisecond

// cachesSynced is a readiness check that fails until every informer of each of caches has synced.
func cachesSynced(caches ...cacheSyncer) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), cacheSyncProbeWait)
		defer cancel()
		for _, c := range caches {
			if !c.WaitForCacheSync(ctx) {
				return errors.New("informer caches not synced yet")
			}
		}
		return nil
	}
}
