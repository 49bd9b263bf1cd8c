// Package app assembles the fleetnet-agent process: flags, identity,
// leader election, the registry connection and the export controllers.
package app

import (
	"context"
	"errors"
	"fmt"
	aboutv1alpha1 "github.com/fleetnet/fleetnet/api/about/v1alpha1"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/agent/export"
	"github.com/fleetnet/fleetnet/internal/agent/identity"
	"github.com/fleetnet/fleetnet/internal/agent/importer"
	"github.com/fleetnet/fleetnet/internal/agent/lease"
	"github.com/fleetnet/fleetnet/internal/agent/publish"
	"github.com/fleetnet/fleetnet/internal/certfiles"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/fleetnet/fleetnet/internal/registry/validate"
	"github.com/fleetnet/fleetnet/internal/scheme"
	"github.com/fleetnet/fleetnet/internal/skewcheck"
	"github.com/fleetnet/fleetnet/internal/tracing"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Options are the agent's flags.
type Options struct {
	Identity           identity.Flags
	Registry           client.Options
	MetricsAddr        string
	PprofAddr          string
	HealthAddr         string
	LeaderElect        bool
	LeaderElectionNS   string
	WatchNamespaces    string
	ExportResyncPeriod time.Duration
	ImportResyncPeriod time.Duration
	EndpointsPerSlice  int
	ImportWorkers      int
	// KubeAPIQPS and KubeAPIBurst bound the agent's requests to its
	// cluster's API server (client-go's token bucket); a QPS of zero means
	// no client-side limit (API Priority and Fairness still applies).
	KubeAPIQPS   float32
	KubeAPIBurst int
	// ImportNamespaces, comma-separated, are the only namespaces whose
	// imports this cluster holds (its import policy): the registry sends
	// no other. Empty: every namespace.
	ImportNamespaces string
	// CreateImportNamespaces lets the agent create an import's namespace
	// when the cluster has none of that name.
	CreateImportNamespaces bool
	// AzureLoadBalancerID is the cluster's public Azure load balancer,
	// whose frontends exported Services of type LoadBalancer publish.
	AzureLoadBalancerID string
	// Registerer receives the agent's own metrics; controller-runtime's
	// registry (served on --metrics-bind-address) when nil.
	Registerer prometheus.Registerer
	// Tracing sends traces of publishes and applies to an OTLP collector
	// (off by default).
	Tracing tracing.Options
	// EastWest is the cluster's east-west gateway, when it has one.
	EastWest EastWestOptions
}

// BindFlags registers the options on fs. The kubeconfig flag is
// controller-runtime's, added by the command with the other Go flags.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Identity.Source, "cluster-identity-source", identity.SourceFlags, "where the cluster identity comes from: flags, or clusterproperty (ClusterProperty objects cluster.clusterset.k8s.io and clusterset.k8s.io)")
	fs.StringVar(&o.Identity.ClusterID, "cluster-id", "", "this cluster's id, an RFC 1123 label unique in the clusterset")
	fs.StringVar(&o.Identity.ClusterSetID, "clusterset-id", "", "the clusterset's id, an RFC 1123 label")
	fs.StringVar(&o.Identity.Region, "region", "", "this cluster's region, a valid label value")
	fs.StringVar(&o.Registry.Address, "registry", "", "the registry's address host:port, or several replicas' host:port,host:port (calls go to the connected ones; a replica lost is failed over within a second)")
	fs.StringVar(&o.Registry.CAFile, "registry-ca-file", "", "CA bundle that signed the registry's certificate")
	fs.StringVar(&o.Registry.CertFile, "registry-cert-file", "", "this cluster's client certificate")
	fs.StringVar(&o.Registry.KeyFile, "registry-key-file", "", "this cluster's client key")
	fs.StringVar(&o.Registry.Token, "registry-token", "", "bearer token, instead of a client certificate (visible to anyone who can list processes: prefer --registry-token-file)")
	fs.StringVar(&o.Registry.TokenFile, "registry-token-file", "", "file holding a bearer token, instead of a client certificate; read at each call, so a rotated token is used at once")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "address of /metrics")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "", "address of Go's /debug/pprof/ profiles (empty: off); keep it on loopback")
	fs.StringVar(&o.HealthAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "elect a leader (a Lease in --leader-election-namespace); only the leader registers and writes")
	fs.StringVar(&o.LeaderElectionNS, "leader-election-namespace", "fleetnet-system", "namespace of the leader election Lease")
	fs.StringVar(&o.WatchNamespaces, "watch-namespaces", "", "comma-separated namespaces to export from; empty means all")
	fs.StringVar(&o.AzureLoadBalancerID, "azure-load-balancer-id", "", "resource id of this cluster's public Azure load balancer (AKS: loadBalancers/kubernetes in the node resource group); exported Services of type LoadBalancer then publish their frontend for cross-region load balancers, and internal ones with azure-pls-create=true their Private Link Service for Front Door Premium")
	fs.DurationVar(&o.ExportResyncPeriod, "export-resync-period", 10*time.Minute, "how often every export is compared with the registry")
	fs.DurationVar(&o.ImportResyncPeriod, "import-resync-period", 10*time.Minute, "how often every import is compared with the cluster, bounding repair when an event is missed")
	fs.IntVar(&o.EndpointsPerSlice, "endpoints-per-slice", 100, "most endpoints in one imported EndpointSlice (1 to 1000)")
	fs.IntVar(&o.ImportWorkers, "import-workers", 4, "how many imports are reconciled at once (1 to 64)")
	fs.StringVar(&o.ImportNamespaces, "import-namespaces", "", "comma-separated namespaces to import into, the cluster's import policy (the registry sends no other namespace's imports, and imports made before in others are removed); empty means all")
	fs.BoolVar(&o.CreateImportNamespaces, "create-import-namespaces", false, "create the namespace of an import when the cluster has none (labelled app.kubernetes.io/managed-by=fleetnet-agent, never deleted by the agent); off, such an import waits for its namespace (fleetnet_agent_imports_pending)")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", 200, "requests per second to this cluster's API server, on average (a join of 5,000 imports is about 25,000 writes); 0: no limit of the agent's own. The chart's FlowSchema also keeps them from starving the cluster's own controllers")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", 400, "requests to this cluster's API server in a burst above --kube-api-qps")
	o.Tracing.BindFlags(fs)
	o.EastWest.BindFlags(fs)
}

// Validate checks the options without connecting to anything, so that a
// bad flag is reported as such rather than as a failure to reach the
// cluster or the registry. Every error names its flag and value.
func (o *Options) Validate() error {
	var errs []error
	if err := o.Identity.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Registry.Address == "" {
		errs = append(errs, errors.New("--registry is required"))
	}
	if o.Registry.CAFile == "" {
		errs = append(errs, errors.New("--registry-ca-file is required"))
	}
	if o.Registry.Token != "" && o.Registry.TokenFile != "" {
		errs = append(errs, errors.New("--registry-token and --registry-token-file: give one"))
	}
	if o.ExportResyncPeriod < time.Second {
		errs = append(errs, fmt.Errorf("--export-resync-period=%s: must be at least 1s", o.ExportResyncPeriod))
	}
	if o.ImportResyncPeriod < time.Second {
		errs = append(errs, fmt.Errorf("--import-resync-period=%s: must be at least 1s", o.ImportResyncPeriod))
	}
	if bad := validate.Namespaces(o.importNamespaces(), field.NewPath("--import-namespaces")); len(bad) > 0 {
		errs = append(errs, bad.ToAggregate())
	}
	if o.ImportWorkers < 1 || o.ImportWorkers > 64 {
		errs = append(errs, fmt.Errorf("--import-workers=%d: must be between 1 and 64", o.ImportWorkers))
	}
	if err := export.ValidateAzureLoadBalancerID(o.AzureLoadBalancerID); err != nil {
		errs = append(errs, err)
	}
	if o.KubeAPIQPS < 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps=%g: must not be negative", o.KubeAPIQPS))
	}
	if o.KubeAPIQPS > 0 && o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst=%d: must be at least 1", o.KubeAPIBurst))
	}
	if o.EndpointsPerSlice < 1 || o.EndpointsPerSlice > 1000 {
		errs = append(errs, fmt.Errorf("--endpoints-per-slice=%d: must be between 1 and 1000", o.EndpointsPerSlice))
	}
	if err := o.EastWest.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// importNamespaces are the namespaces of --import-namespaces, nil for all.
func (o Options) importNamespaces() []string {
	var out []string
	for _, ns := range strings.Split(o.ImportNamespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

// Run runs the agent until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o Options, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	if err := o.Validate(); err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	if o.KubeAPIQPS == 0 {
		// client-go takes a QPS of 0 for its default (5 per second); a
		// negative one means no limiter at all.
		cfg.QPS = -1
	}
	reader, err := ctrlclient.New(cfg, ctrlclient.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	cluster, err := identity.Resolve(ctx, reader, o.Identity)
	if err != nil {
		return err
	}
	watchProperties, err := initialProperties(ctx, reader, cluster, log)
	if err != nil {
		return err
	}
	cluster.EastwestGateway = o.EastWest.Address
	// Read once: a cluster that moves to another network restarts its
	// agent (its imports change wholesale).
	network := cluster.GetProperties()[keys.PropertyNetwork]
	families, err := importer.ServiceFamilies(ctx, reader)
	if err != nil {
		return err
	}
	tp, err := tracing.Setup(ctx, o.Tracing, "fleetnet-agent", attribute.String(keys.ResourceClusterID, cluster.GetId()))
	if err != nil {
		return err
	}
	defer func() {
		// Flushed on the way out, after the manager stopped.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("traces not all sent", "err", err)
		}
	}()
	var tracer trace.Tracer
	if o.Tracing.Enabled() {
		tracer = tp.Tracer(tracing.Scope)
		log.Info("sending traces", "otlpEndpoint", o.Tracing.Endpoint, "insecure", o.Tracing.Insecure)
	}
	ro := o.Registry
	ro.Component, ro.Log = "agent", log
	regClient, conn, err := client.Dial(ro)
	if err != nil {
		return fmt.Errorf("--registry: %w", err)
	}
	defer conn.Close()

	namespaces := map[string]bool{}
	for _, ns := range strings.Split(o.WatchNamespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			namespaces[ns] = true
		}
	}
	inScope := func(ns string) bool { return len(namespaces) == 0 || namespaces[ns] }

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme.Scheme,
		Logger:                  logr.FromSlogHandler(log.Handler()),
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.HealthAddr,
		PprofBindAddress:        o.PprofAddr,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        keys.LeaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNS,
		// ServiceExports outside --watch-namespaces stay in the cache so
		// that their finalizers are released when the scope narrows.
		Cache: cache.Options{},
		// Controller names are unique per process in controller-runtime;
		// tests run several agents (and restarts) in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	resyncs := prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetnet_agent_export_resyncs_total", Help: "Completed export resyncs."})
	reg := o.Registerer
	if reg == nil {
		reg = metrics.Registry
	}
	reg.MustRegister(resyncs, export.NewStateCollector(mgr.GetClient()))
	if err := certfiles.Register(reg); err != nil {
		return err
	}
	if err := skewcheck.Register(reg); err != nil {
		return err
	}
	pub := publish.New(regClient, cluster.GetId(), publish.NewMetrics(reg))
	pub.Tracer = tracer
	events := make(chan event.GenericEvent, 4096)
	registrar := &lease.Registrar{Client: regClient, Cluster: cluster, Log: log,
		Recorder: mgr.GetEventRecorder("fleetnet-agent"), Regarding: eventObject(ctx, reader, o)}
	statusWatcher := &export.StatusWatcher{Client: regClient, Cluster: cluster.GetId(), Publisher: pub, Log: log, Events: events}
	registrar.OnRegistered = func(ctx context.Context) error {
		// After a (re-)registration the registry may hold anything from all
		// to nothing of ours: read it back, then compare every export.
		resp, err := regClient.ListExports(ctx, &registryv1.ListExportsRequest{ClusterId: cluster.GetId(), IncludeEndpoints: true})
		if err != nil {
			return err
		}
		pub.Reset(resp)
		go enqueueAll(ctx, mgr, events, log)
		return nil
	}
	// Exports that failed while the registry was away are retried at once.
	registrar.OnRecovered = func(ctx context.Context) { go enqueueAll(ctx, mgr, events, log) }
	if err := mgr.Add(registrar); err != nil {
		return err
	}
	if watchProperties {
		// A change of the ClusterProperties registers the cluster again
		// with its new properties (exports' export-to-selector).
		if err := (&identity.PropertyWatcher{Client: mgr.GetClient(), Cluster: cluster, Update: registrar.UpdateProperties,
			Recorder: mgr.GetEventRecorder("fleetnet-agent"), Log: log}).SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if err := mgr.Add(statusWatcher); err != nil {
		return err
	}
	rec := &export.Reconciler{
		Client: mgr.GetClient(), Cluster: cluster.GetId(), Publisher: pub, Status: statusWatcher,
		Recorder: mgr.GetEventRecorder("fleetnet-agent"), Log: log, InScope: inScope, Registered: registrar.Registered,
		AzureLoadBalancerID: o.AzureLoadBalancerID,
	}
	if err := rec.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&export.AutoExporter{Client: mgr.GetClient(), Log: log, InScope: inScope}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.Add(&export.Resyncer{
		Client: regClient, Cache: mgr.GetCache(), Reader: mgr.GetClient(), Cluster: cluster.GetId(), Publisher: pub,
		Events: events, Period: o.ExportResyncPeriod, Log: log, Completed: resyncs, Registered: registrar.Registered,
	}); err != nil {
		return err
	}
	importEvents := make(chan event.GenericEvent, 4096)
	streamSynced := prometheus.NewGauge(prometheus.GaugeOpts{Name: "fleetnet_agent_registry_stream_synced", Help: "1 while the agent holds a synced view of the registry's imports."})
	reg.MustRegister(streamSynced)
	stream := &importer.Stream{Client: regClient, Log: log, Synced: streamSynced, Namespaces: o.importNamespaces(), Changed: func(k types.NamespacedName) {
		si := &mcsv1beta1.ServiceImport{}
		si.Namespace, si.Name = k.Namespace, k.Name
		select { // the controller stops reading at shutdown
		case importEvents <- event.GenericEvent{Object: si}:
		case <-ctx.Done():
		}
	}}
	progress := importer.NewProgress(reg, stream, log)
	if err := mgr.Add(progress); err != nil {
		return err
	}
	if err := mgr.Add(stream); err != nil {
		return err
	}
	gateway, err := startEastWest(ctx, mgr, o, statusWatcher, log)
	if err != nil {
		return err
	}
	policies, why, err := policiesUsable(ctx, mgr)
	if err != nil {
		return err
	}
	if !policies {
		log.Info("locality policies are not applied to imports: "+why+" (then restart the agent)", "role", "config/rbac/role.yaml")
	}
	if err := (&importer.Reconciler{
		Client: mgr.GetClient(), Stream: stream, Families: families, EndpointsPerSlice: o.EndpointsPerSlice, Workers: o.ImportWorkers,
		Recorder: mgr.GetEventRecorder("fleetnet-agent"), Log: log, Events: importEvents, Pending: importer.NewPendingTracker(reg),
		Progress: progress, CreateNamespaces: o.CreateImportNamespaces,
		Cluster: cluster.GetId(), Region: cluster.GetRegion(), Policies: policies, Tracer: tracer,
		Network: network, EastWest: gateway,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.Add(&importer.Resyncer{Stream: stream, Cache: mgr.GetCache(), Reader: mgr.GetClient(), Events: importEvents, Period: o.ImportResyncPeriod}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("cache", func(r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return fmt.Errorf("informer caches not synced yet")
		}
		return nil
	}); err != nil {
		return err
	}
	log.Info("starting agent", "cluster", cluster.GetId(), "clusterset", cluster.GetClustersetId(), "region", cluster.GetRegion(), "network", network, "registry", o.Registry.Address)
	return mgr.Start(ctx)
}

// initialProperties sets the properties the cluster registers with (see
// identity.Properties) from its ClusterProperty objects, and says whether
// to watch them for changes: not when the cluster does not serve them (no
// CRD) or the agent may not list them, when it publishes its identity's
// alone.
func initialProperties(ctx context.Context, reader ctrlclient.Reader, cluster *registryv1.Cluster, log *slog.Logger) (bool, error) {
	list := &aboutv1alpha1.ClusterPropertyList{}
	err := reader.List(ctx, list)
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		log.Info("publishing no ClusterProperties but the cluster's identity: exports' "+keys.AnnotationExportToSelector+" match only those", "err", err)
		list.Items = nil
	case err != nil:
		return false, fmt.Errorf("listing ClusterProperties to publish: %w", err)
	}
	// What is ignored is reported by the watcher, on the objects.
	cluster.Properties, _ = identity.Properties(list.Items, cluster)
	return err == nil, nil
}

// enqueueAll asks for a reconcile of every ServiceExport, once the cache is
// synced.
func enqueueAll(ctx context.Context, mgr ctrl.Manager, events chan<- event.GenericEvent, log *slog.Logger) {
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return
	}
	list := &mcsv1beta1.ServiceExportList{}
	if err := mgr.GetClient().List(ctx, list); err != nil {
		log.Error("listing ServiceExports to republish", "err", err)
		return
	}
	for i := range list.Items {
		select {
		case events <- event.GenericEvent{Object: &list.Items[i]}:
		case <-ctx.Done():
			return
		}
	}
}

// eventObject is what the agent's Warning events about the cluster itself
// are attached to: the ClusterProperty holding the cluster's id when the
// identity comes from there, else the agent's leader election Lease (which
// need not exist for its events to be listed).
func eventObject(ctx context.Context, reader ctrlclient.Reader, o Options) ctrlclient.Object {
	if o.Identity.Source == identity.SourceClusterProperty {
		cp := &aboutv1alpha1.ClusterProperty{}
		if err := reader.Get(ctx, types.NamespacedName{Name: aboutv1alpha1.ClusterIDPropertyName}, cp); err == nil {
			return cp
		}
	}
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: o.LeaderElectionNS, Name: keys.LeaderElectionID}}
}

// policiesUsable reports whether the agent can apply BackendTrafficPolicies
// to imports: the API server serves them (clusters joined before the CRD
// was in the agent's chart lack it) and the agent may list and watch them
// and Nodes (a role from before locality lacks that, and watching without
// the right would hold the import controller's start). When not, why says
// what is missing.
func policiesUsable(ctx context.Context, mgr ctrl.Manager) (bool, string, error) {
	gvk := networkingv1alpha1.SchemeGroupVersion.WithKind("BackendTrafficPolicy")
	if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); meta.IsNoMatchError(err) {
		return false, "the backendtrafficpolicies." + gvk.Group + " CRD is not installed", nil
	} else if err != nil {
		return false, "", fmt.Errorf("looking up the BackendTrafficPolicy API: %w", err)
	}
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return false, "", err
	}
	var missing []string
	for _, res := range []struct{ group, resource string }{{"", "nodes"}, {gvk.Group, "backendtrafficpolicies"}} {
		for _, verb := range []string{"list", "watch"} {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Group: res.group, Resource: res.resource, Verb: verb},
			}}
			got, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			if err != nil {
				return false, "", fmt.Errorf("asking whether the agent may %s %s: %w", verb, res.resource, err)
			}
			if !got.Status.Allowed {
				missing = append(missing, verb+" "+res.resource)
			}
		}
	}
	if len(missing) > 0 {
		return false, "the agent's role does not allow " + strings.Join(missing, ", "), nil
	}
	return true, "", nil
}
