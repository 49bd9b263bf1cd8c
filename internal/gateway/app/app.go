// Package app assembles the fleetnet-gateway process: the Gateway API
// controller on the hub cluster, the provider queue, and the embedded
// provider's model distribution server for fleetnet-edge.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/fleetnet/fleetnet/internal/azure/armutil"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/certfiles"
	"github.com/fleetnet/fleetnet/internal/distribute"
	"github.com/fleetnet/fleetnet/internal/gateway/controller"
	"github.com/fleetnet/fleetnet/internal/gateway/lastaccepted"
	"github.com/fleetnet/fleetnet/internal/gateway/provider"
	"github.com/fleetnet/fleetnet/internal/gateway/provider/azure/crossregion"
	"github.com/fleetnet/fleetnet/internal/gateway/provider/azure/frontdoor"
	"github.com/fleetnet/fleetnet/internal/gateway/provider/azure/frontdoor/annotations"
	edgeprovider "github.com/fleetnet/fleetnet/internal/gateway/provider/edge"
	"github.com/fleetnet/fleetnet/internal/recovered"
	"github.com/fleetnet/fleetnet/internal/scheme"
	"github.com/fleetnet/fleetnet/internal/skewcheck"
	"github.com/fleetnet/fleetnet/internal/tlsrefusal"
	"github.com/fleetnet/fleetnet/pkg/generated/clientset/versioned"
	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Options are the gateway's flags.
type Options struct {
	ClusterID        string
	Region           string
	EdgeListen       string
	TLSCertFile      string
	TLSKeyFile       string
	ClientCAFile     string
	Addresses        string
	AddressPool      string
	MetricsAddr      string
	HealthAddr       string
	LeaderElect      bool
	LeaderElectionNS string
	// EdgeReservedPorts are the ports the edges hold for themselves
	// (their metrics and health ports), comma-separated.
	EdgeReservedPorts string
	// StateNamespace keeps each Gateway's and MultiClusterLoadBalancer's
	// last accepted spec (lastaccepted.Secrets); "" keeps it in memory.
	StateNamespace string
	// Provider replaces the embedded edge provider (tests of the
	// controller's behaviour when a provider fails); nil runs the edge's.
	Provider provider.Provider
	// Clouds are the providers of load balancer classes other than edge,
	// by class (e.g. azure-cross-region).
	Clouds map[string]provider.Provider
	// Azure turns on the azure-cross-region provider when its
	// subscription is set.
	Azure AzureOptions
}

// AzureOptions configure the azure-cross-region provider.
type AzureOptions struct {
	SubscriptionID string
	ResourceGroup  string
	Location       string
	Owner          string
	Credential     string
	ClientID       string
	PollInterval   time.Duration
	Resync         time.Duration
	// WaitBound and FrontDoorWaitBound are how long an operation (or a
	// Front Door deployment) may run before its object is
	// Programmed=False with reason AzureTimeout; 0 the provider's default.
	WaitBound          time.Duration
	FrontDoorWaitBound time.Duration
	// TryTimeout bounds each try of an ARM request (0: the providers'
	// default, armutil.DefaultTryTimeout).
	TryTimeout time.Duration
	// FrontDoorClasses turns on the Azure Front Door provider for
	// Gateways: "class=Standard,class=Premium" (GatewayClass name and the
	// tier it selects).
	FrontDoorClasses string
	// FrontDoorResourceGroup holds the Front Door profiles (default
	// ResourceGroup).
	FrontDoorResourceGroup string
	// FrontDoorAbsentFor is how long a withdrawn Front Door resource must
	// stay absent before its withdrawal is complete.
	FrontDoorAbsentFor time.Duration
	// TokenCredential and ClientOptions replace the credential and the
	// ARM client options (tests: a fake credential and the simulation's
	// transport).
	TokenCredential azcore.TokenCredential
	ClientOptions   *arm.ClientOptions
}

// BindFlags registers the options on fs.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ClusterID, "cluster-id", "", "the hub cluster's id: the cluster of Service backends' endpoints")
	fs.StringVar(&o.Region, "region", "", "the hub cluster's region, a valid label value")
	fs.StringVar(&o.Azure.SubscriptionID, "azure-subscription-id", "", "Azure subscription of cross-region load balancers; set, MultiClusterLoadBalancers of class azure-cross-region are served")
	fs.StringVar(&o.Azure.ResourceGroup, "azure-resource-group", "", "resource group (existing) of the cross-region load balancers and their public IPs")
	fs.StringVar(&o.Azure.Location, "azure-location", "", "home region of the cross-region load balancers (one Azure allows for Global tier, e.g. westeurope, eastus2)")
	fs.StringVar(&o.Azure.Owner, "azure-owner", "", "owner tag of the resources this gateway manages, one per fleet sharing a resource group (default: --cluster-id)")
	fs.StringVar(&o.Azure.Credential, "azure-credential", crossregion.CredentialDefault, "how to authenticate to Azure: "+strings.Join(crossregion.CredentialKinds, ", "))
	fs.StringVar(&o.Azure.ClientID, "azure-client-id", "", "client id of the managed or workload identity (optional)")
	fs.DurationVar(&o.Azure.PollInterval, "azure-poll-interval", 10*time.Second, "how often a long-running Azure operation is polled")
	fs.DurationVar(&o.Azure.Resync, "azure-resync", 10*time.Minute, "how often Azure resources are compared with the model, repairing drift")
	fs.DurationVar(&o.Azure.WaitBound, "azure-wait-bound", crossregion.DefaultWaitBound, "how long a cross-region load balancer's Azure operation may run before it is Programmed=False with reason AzureTimeout (polling goes on; past 4x it is retried)")
	fs.DurationVar(&o.Azure.FrontDoorWaitBound, "azure-front-door-wait-bound", frontdoor.DefaultWaitBound, "how long a Front Door operation or deployment may run before its Gateway is Programmed=False with reason AzureTimeout (polling goes on; past 4x it is retried)")
	fs.DurationVar(&o.Azure.TryTimeout, "azure-try-timeout", armutil.DefaultTryTimeout, "how long one try of an Azure Resource Manager request may go unanswered before it is tried again (then, past the retries, the object is Programmed=False with reason AzureTimeout)")
	fs.StringVar(&o.Azure.FrontDoorClasses, "azure-front-door-classes", "", "GatewayClasses whose Gateways Azure Front Door serves, with the tier each selects, e.g. afd=Standard,afd-private=Premium (needs --azure-subscription-id)")
	fs.StringVar(&o.Azure.FrontDoorResourceGroup, "azure-front-door-resource-group", "", "resource group (existing) of the Front Door profiles (default: --azure-resource-group)")
	fs.DurationVar(&o.Azure.FrontDoorAbsentFor, "azure-front-door-absent-for", 2*time.Minute, "how long a withdrawn Front Door resource must be observed absent before its withdrawal is complete")
	fs.StringVar(&o.EdgeListen, "edge-listen", ":7444", "address fleetnet-edge connects to for models (gRPC, mTLS)")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "serving certificate of the edge listener")
	fs.StringVar(&o.TLSKeyFile, "tls-key-file", "", "serving key of the edge listener")
	fs.StringVar(&o.ClientCAFile, "client-ca-file", "", "the fleet CA, which signs the edges' client certificates")
	fs.StringVar(&o.Addresses, "gateway-addresses", "", "comma-separated addresses (IPs or host names) where the edges serve the Gateways, for status.addresses")
	fs.StringVar(&o.AddressPool, "gateway-address-pool", "", "a prefix (e.g. 127.0.1.0/24) from which every edge Gateway gets an address of its own, where the edges bind its listeners (each edge must be able to bind every address of it); Gateways then may share port numbers. Empty: every Gateway is served at --gateway-addresses")
	fs.StringVar(&o.EdgeReservedPorts, "edge-reserved-ports", "9090,9091", "comma-separated TCP ports the edges hold for themselves (their --metrics-bind-address and --health-probe-bind-address ports): a Gateway listener or an edge MultiClusterLoadBalancer there is refused with a condition saying so, instead of being sent to edges that cannot bind it")
	fs.StringVar(&o.StateNamespace, "state-namespace", "", "namespace (this gateway's own) where the spec of every Gateway's and MultiClusterLoadBalancer's last accepted generation is kept, in Secrets of type "+keys.SecretTypeLastAccepted+", so that a refused edit keeps that generation serving across restarts and leader changes (needs a Role there: get, list, create, patch, delete Secrets); empty keeps them in memory only")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "address of /metrics")
	fs.StringVar(&o.HealthAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "elect a leader (a Lease in --leader-election-namespace); only the leader reconciles and serves models")
	fs.StringVar(&o.LeaderElectionNS, "leader-election-namespace", "fleetnet-system", "namespace of the leader election Lease")
}

// Validate checks the flags before anything connects.
func (o *Options) Validate() error {
	var errs []error
	for _, msg := range validation.IsDNS1123Label(o.ClusterID) {
		errs = append(errs, fmt.Errorf("--cluster-id=%q: %s", o.ClusterID, msg))
	}
	for _, msg := range validation.IsValidLabelValue(o.Region) {
		errs = append(errs, fmt.Errorf("--region=%q: %s", o.Region, msg))
	}
	for _, f := range []struct{ name, value string }{{"--tls-cert-file", o.TLSCertFile}, {"--tls-key-file", o.TLSKeyFile}, {"--client-ca-file", o.ClientCAFile}} {
		if f.value == "" {
			errs = append(errs, fmt.Errorf("%s is required", f.name))
		}
	}
	if _, _, err := net.SplitHostPort(o.EdgeListen); err != nil {
		errs = append(errs, fmt.Errorf("--edge-listen=%q: %w", o.EdgeListen, err))
	}
	if _, err := ParseReservedPorts(o.EdgeReservedPorts); err != nil {
		errs = append(errs, err)
	}
	if o.StateNamespace != "" {
		for _, msg := range validation.IsDNS1123Label(o.StateNamespace) {
			errs = append(errs, fmt.Errorf("--state-namespace=%q: %s", o.StateNamespace, msg))
		}
	}
	if o.AddressPool != "" {
		if _, err := netip.ParsePrefix(o.AddressPool); err != nil {
			errs = append(errs, fmt.Errorf("--gateway-address-pool=%q: want a prefix such as 127.0.1.0/24: %w", o.AddressPool, err))
		}
	}
	if a := o.Azure; a.SubscriptionID != "" {
		if a.ResourceGroup == "" {
			errs = append(errs, errors.New("--azure-resource-group is required with --azure-subscription-id"))
		}
		if a.Location == "" {
			errs = append(errs, errors.New("--azure-location is required with --azure-subscription-id"))
		}
		if !slices.Contains(crossregion.CredentialKinds, a.Credential) {
			errs = append(errs, fmt.Errorf("--azure-credential=%q: want one of %s", a.Credential, strings.Join(crossregion.CredentialKinds, ", ")))
		}
		if a.PollInterval < time.Second {
			errs = append(errs, fmt.Errorf("--azure-poll-interval=%s: must be at least 1s", a.PollInterval))
		}
		if a.TryTimeout < 0 {
			errs = append(errs, fmt.Errorf("--azure-try-timeout=%s: must not be negative", a.TryTimeout))
		}
	}
	if a := o.Azure; a.FrontDoorClasses != "" {
		if a.SubscriptionID == "" {
			errs = append(errs, fmt.Errorf("--azure-front-door-classes=%q needs --azure-subscription-id", a.FrontDoorClasses))
		}
		if _, err := ParseFrontDoorClasses(a.FrontDoorClasses); err != nil {
			errs = append(errs, err)
		}
		if a.FrontDoorAbsentFor < 0 {
			errs = append(errs, fmt.Errorf("--azure-front-door-absent-for=%s: must not be negative", a.FrontDoorAbsentFor))
		}
		for _, f := range []struct {
			flag string
			v    time.Duration
		}{{"--azure-wait-bound", a.WaitBound}, {"--azure-front-door-wait-bound", a.FrontDoorWaitBound}} {
			if f.v < 0 {
				errs = append(errs, fmt.Errorf("%s=%s: must not be negative", f.flag, f.v))
			}
		}
	}
	return errors.Join(errs...)
}

// ParseReservedPorts parses --edge-reserved-ports: comma-separated TCP
// ports, each with what holds it for model.Input.ReservedPorts.
func ParseReservedPorts(v string) (map[int32]string, error) {
	out := map[int32]string{}
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		port, err := strconv.ParseInt(f, 10, 32)
		if err != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf("--edge-reserved-ports=%q: %q is not a port between 1 and 65535", v, f)
		}
		out[int32(port)] = "the edges hold it for themselves (fleetnet-gateway's --edge-reserved-ports: their metrics and health ports)"
	}
	return out, nil
}

// ParseFrontDoorClasses parses --azure-front-door-classes: comma-separated
// class=tier pairs, each class a DNS subdomain, each tier Standard or
// Premium.
func ParseFrontDoorClasses(v string) (map[string]annotations.SKU, error) {
	out := map[string]annotations.SKU{}
	for _, pair := range strings.Split(v, ",") {
		class, tier, ok := strings.Cut(strings.TrimSpace(pair), "=")
		switch {
		case !ok || class == "":
			return nil, fmt.Errorf("--azure-front-door-classes=%q: %q is not class=tier", v, pair)
		case len(validation.IsDNS1123Subdomain(class)) > 0:
			return nil, fmt.Errorf("--azure-front-door-classes=%q: GatewayClass %q is not a valid name", v, class)
		case tier != string(annotations.SKUStandard) && tier != string(annotations.SKUPremium):
			return nil, fmt.Errorf("--azure-front-door-classes=%q: tier %q of %s: want Standard or Premium", v, tier, class)
		}
		if _, dup := out[class]; dup {
			return nil, fmt.Errorf("--azure-front-door-classes=%q: GatewayClass %s given twice", v, class)
		}
		out[class] = annotations.SKU(tier)
	}
	return out, nil
}

// azureProvider builds the azure-cross-region provider, nil when
// --azure-subscription-id is unset.
func azureProvider(o Options, log *slog.Logger) (*crossregion.Provider, error) {
	a := o.Azure
	if a.SubscriptionID == "" {
		return nil, nil
	}
	cred, err := azureCredential(a)
	if err != nil {
		return nil, err
	}
	owner := cmp.Or(a.Owner, o.ClusterID)
	p, err := crossregion.New(crossregion.Config{SubscriptionID: a.SubscriptionID, ResourceGroup: a.ResourceGroup, Location: a.Location,
		Owner: owner, Credential: cred, ClientOptions: a.ClientOptions, PollInterval: a.PollInterval, Resync: a.Resync, WaitBound: a.WaitBound, TryTimeout: a.TryTimeout, Log: log})
	if err != nil {
		return nil, fmt.Errorf("azure-cross-region provider: %w", err)
	}
	return p, nil
}

func azureCredential(a AzureOptions) (azcore.TokenCredential, error) {
	if a.TokenCredential != nil {
		return a.TokenCredential, nil
	}
	return crossregion.NewCredential(a.Credential, a.ClientID)
}

// frontDoorProvider builds the Azure Front Door provider, nil when
// --azure-front-door-classes is unset. Resume tokens go into the
// Gateways' annotation and failures into Warning events on them.
func frontDoorProvider(o Options, c client.Client, recorder events.EventRecorder, log *slog.Logger) (*frontdoor.Provider, map[string]annotations.SKU, error) {
	a := o.Azure
	if a.FrontDoorClasses == "" {
		return nil, nil, nil
	}
	classes, err := ParseFrontDoorClasses(a.FrontDoorClasses)
	if err != nil {
		return nil, nil, err
	}
	cred, err := azureCredential(a)
	if err != nil {
		return nil, nil, err
	}
	event := func(gateway, reason, message string) {
		ns, name, _ := strings.Cut(gateway, "/")
		gw := &gwv1.Gateway{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, gw); err == nil && recorder != nil {
			recorder.Eventf(gw, nil, corev1.EventTypeWarning, reason, "Deploy", "%s", message)
		}
	}
	p, err := frontdoor.New(frontdoor.Config{SubscriptionID: a.SubscriptionID, ResourceGroup: cmp.Or(a.FrontDoorResourceGroup, a.ResourceGroup),
		Owner: cmp.Or(a.Owner, o.ClusterID), Classes: classes, Credential: cred, ClientOptions: a.ClientOptions,
		PollInterval: a.PollInterval, Resync: a.Resync, WaitBound: a.FrontDoorWaitBound, TryTimeout: a.TryTimeout, AbsentFor: a.FrontDoorAbsentFor, Tokens: &AnnotationTokens{Client: c}, Event: event, Log: log})
	if err != nil {
		return nil, nil, fmt.Errorf("azure-front-door provider: %w", err)
	}
	return p, classes, nil
}

// Run runs the gateway until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o Options, log *slog.Logger) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if log == nil {
		log = slog.Default()
	}
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	serving, err := loadServing(ctx, o, log)
	if err != nil {
		return err
	}
	if err := certfiles.Register(ctrlmetrics.Registry); err != nil {
		return err
	}
	if err := tlsrefusal.Register(ctrlmetrics.Registry); err != nil {
		return err
	}
	if err := recovered.Register(ctrlmetrics.Registry); err != nil {
		return err
	}
	if err := skewcheck.Register(ctrlmetrics.Registry); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme.Scheme,
		Logger:                  logr.FromSlogHandler(log.Handler()),
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.HealthAddr,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        keys.FieldManagerGateway,
		LeaderElectionNamespace: o.LeaderElectionNS,
		// Only TLS Secrets: listeners reference nothing else, and caching
		// every Secret of the cluster would hold every credential in memory.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Field: fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS))},
		}},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	dist := distribute.NewServer(log)
	var addrs []string
	for _, a := range strings.Split(o.Addresses, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	var prov provider.Provider = &edgeprovider.Provider{Server: dist, Addresses: addrs}
	if o.Provider != nil {
		prov = o.Provider
	}
	events := make(chan event.GenericEvent, 1)
	bundles, err := controller.BundleVersions(ctx, mgr.GetAPIReader())
	if err != nil {
		return err
	}
	cs, err := versioned.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the networking.fleetnet.dev client: %w", err)
	}
	clouds := maps.Clone(o.Clouds)
	azure, err := azureProvider(o, log)
	if err != nil {
		return err
	}
	if azure != nil {
		if clouds == nil {
			clouds = map[string]provider.Provider{}
		}
		clouds[crossregion.Class] = azure
	}
	recorder := mgr.GetEventRecorder(keys.FieldManagerGateway)
	fd, fdClasses, err := frontDoorProvider(o, mgr.GetClient(), recorder, log)
	if err != nil {
		return err
	}
	gatewayClasses, tiers := map[string]string{}, map[string]string{}
	for class, tier := range fdClasses {
		tiers[class] = string(tier)
	}
	if fd != nil {
		if clouds == nil {
			clouds = map[string]provider.Provider{}
		}
		clouds[frontdoor.Class] = fd
		for class := range fdClasses {
			gatewayClasses[class] = frontdoor.Class
		}
	}
	split := &provider.Split{Edge: prov, Clouds: clouds, GatewayClasses: gatewayClasses, Log: log}
	// The edge's GatewayClasses list its features; the Front Door
	// provider's list none, since no conformance run measures them.
	classFeatures := func(class string) []gwv1.FeatureName {
		if _, cloud := gatewayClasses[class]; cloud {
			return nil
		}
		out := make([]gwv1.FeatureName, 0, len(edgeprovider.Features))
		for _, f := range edgeprovider.Features {
			out = append(out, gwv1.FeatureName(f))
		}
		return out
	}
	var pool netip.Prefix // validated above
	if o.AddressPool != "" {
		pool = netip.MustParsePrefix(o.AddressPool)
	}
	reserved, _ := ParseReservedPorts(o.EdgeReservedPorts) // validated above
	cloudClass := func(class string) bool {
		_, cloud := gatewayClasses[class]
		return cloud
	}
	split.Metrics = provider.NewMetrics(ctrlmetrics.Registry, split)
	defer split.Metrics.Unregister()
	// The Azure providers count ARM errors, throttling and Private Link
	// connections into the same metrics.
	if azure != nil {
		azure.SetMetrics(split.Metrics)
	}
	if fd != nil {
		fd.SetMetrics(split.Metrics)
	}
	rec := &controller.Reconciler{Client: mgr.GetClient(), Clientset: cs, LoadBalancerClasses: split.Classes(), CRDBundleVersions: bundles,
		Queue: split, Provider: split, Recorder: recorder, ValidateAnnotations: annotations.Validator(tiers), Features: classFeatures, AddressPool: pool, CloudClass: cloudClass, ReservedPorts: reserved, LocalCluster: o.ClusterID, LocalRegion: o.Region, Log: log, Events: events}
	if o.StateNamespace != "" {
		rec.LastAccepted = &lastaccepted.Secrets{Namespace: o.StateNamespace, Client: mgr.GetClient(), Reader: mgr.GetAPIReader()}
	}
	split.OnChange = rec.Trigger
	if azure != nil {
		// Status follows long operations as they go, not only at their end;
		// resync repairs drift, on the leader only.
		azure.SetOnProgress(rec.Trigger)
		if err := mgr.Add(leaderRunnable(func(ctx context.Context) error { azure.Run(ctx); return nil })); err != nil {
			return err
		}
	}
	if fd != nil {
		fd.SetOnProgress(rec.Trigger)
		if err := mgr.Add(leaderRunnable(func(ctx context.Context) error { fd.Run(ctx); return nil })); err != nil {
			return err
		}
	}
	if err := rec.SetupWithManager(mgr); err != nil {
		return err
	}
	// The queues and the distribution server run only on the leader.
	if err := mgr.Add(leaderRunnable(func(ctx context.Context) error { split.Run(ctx); return nil })); err != nil {
		return err
	}
	if err := mgr.Add(leaderRunnable(func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-dist.StatusChanged():
				rec.Trigger()
			}
		}
	})); err != nil {
		return err
	}
	if err := mgr.Add(leaderRunnable(func(ctx context.Context) error { return dist.Serve(ctx, o.EdgeListen, serving, "--edge-listen", log) })); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("cache", healthz.Ping); err != nil {
		return err
	}
	log.Info("starting gateway", "cluster", o.ClusterID, "edgeListen", o.EdgeListen)
	return mgr.Start(ctx)
}

// loadServing is the edges' model stream server, on TLS files reloaded
// when they change until ctx ends.
func loadServing(ctx context.Context, o Options, log *slog.Logger) (*grpc.Server, error) {
	files, err := certfiles.Load(certfiles.Files{CertFile: o.TLSCertFile, KeyFile: o.TLSKeyFile, CAFile: o.ClientCAFile,
		Component: "gateway-model-stream", Usage: "serving", Log: log})
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file/--tls-key-file/--client-ca-file: %w", err)
	}
	go files.Run(ctx, 0)
	cfg := files.ServerConfig(true)
	// A panic in the model stream's handler fails that edge's stream, not
	// the gateway.
	creds := (&tlsrefusal.Observer{Server: "gateway-model-stream", Log: log}).Credentials(credentials.NewTLS(cfg))
	return grpc.NewServer(append(recovered.GRPCServerOptions("gateway-model-stream", log), grpc.Creds(creds))...), nil
}

// leaderRunnable runs only while this process leads.
type leaderRunnable func(ctx context.Context) error

func (f leaderRunnable) Start(ctx context.Context) error { return f(ctx) }
func (leaderRunnable) NeedLeaderElection() bool          { return true }
