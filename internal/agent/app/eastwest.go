package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/agent/eastwest"
	"github.com/fleetnet/fleetnet/internal/agent/export"
	"github.com/fleetnet/fleetnet/internal/agent/publish"
	"github.com/fleetnet/fleetnet/internal/certfiles"
	"github.com/fleetnet/fleetnet/internal/distribute"
	"github.com/fleetnet/fleetnet/internal/eastwest/ports"
	"github.com/fleetnet/fleetnet/internal/recovered"
	"github.com/fleetnet/fleetnet/internal/registry/validate"
	"github.com/fleetnet/fleetnet/internal/tlsrefusal"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// EastWestOptions are the flags of the cluster's east-west gateway, which
// the agent feeds.
type EastWestOptions struct {
	// Address is what other networks' gateways dial (published with the
	// registration).
	Address string
	// Service is the gateway's Service, namespace/name.
	Service string
	// Ports is the range of gateway ports given to imported service ports.
	Ports string
	// ModelListen is where the gateway's model stream is served, with
	// CertFile and KeyFile; edges' client certificates are checked against
	// CAFile (--registry-ca-file when empty).
	ModelListen               string
	CertFile, KeyFile, CAFile string
}

// BindFlags registers the east-west flags on fs.
func (o *EastWestOptions) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Address, "eastwest-gateway-address", "", "host:port at which this cluster's east-west gateway takes streams from other networks' gateways, published with the registration (its LoadBalancer Service's address)")
	fs.StringVar(&o.Service, "eastwest-gateway-service", "", "namespace/name of this cluster's east-west gateway Service: imports with exporting clusters on other networks (ClusterProperty "+"network.fleetnet.dev) go through its endpoints; empty: this cluster has no east-west gateway, and clusters of other networks are left out of its imports")
	fs.StringVar(&o.Ports, "eastwest-gateway-ports", "15100-15999", "the east-west gateway's ports that carry imported service ports, one each, first-last")
	fs.StringVar(&o.ModelListen, "eastwest-model-listen", ":15012", "address of the east-west gateway's model stream (fleetnet-edge --gateway), with --eastwest-gateway-service")
	fs.StringVar(&o.CertFile, "eastwest-model-cert-file", "", "serving certificate of the east-west model stream (its names: the address the gateway dials)")
	fs.StringVar(&o.KeyFile, "eastwest-model-key-file", "", "its key")
	fs.StringVar(&o.CAFile, "eastwest-model-ca-file", "", "CA of the gateway's client certificate (organization fleetnet:edges); empty: --registry-ca-file")
}

// Validate checks the flags; every error names its flag and value.
func (o *EastWestOptions) Validate() error {
	var errs []error
	if o.Address != "" {
		if err := validate.HostPort(o.Address); err != nil {
			errs = append(errs, fmt.Errorf("--eastwest-gateway-address=%q: %w", o.Address, err))
		}
	}
	if o.Service == "" {
		return errors.Join(errs...)
	}
	if _, err := ports.ParseRange(o.Ports); err != nil {
		errs = append(errs, fmt.Errorf("--eastwest-gateway-ports: %w", err))
	}
	if _, err := o.service(); err != nil {
		errs = append(errs, err)
	}
	if o.CertFile == "" || o.KeyFile == "" {
		errs = append(errs, fmt.Errorf("--eastwest-gateway-service=%q needs --eastwest-model-cert-file and --eastwest-model-key-file (the model stream is served over TLS)", o.Service))
	}
	if _, _, err := net.SplitHostPort(o.ModelListen); err != nil {
		errs = append(errs, fmt.Errorf("--eastwest-model-listen=%q: %w", o.ModelListen, err))
	}
	return errors.Join(errs...)
}

func (o *EastWestOptions) service() (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(o.Service, "/")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, fmt.Errorf("--eastwest-gateway-service=%q: want namespace/name", o.Service)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// startEastWest sets up the east-west gateway's side of the agent: the
// port allocator, the model publisher and its stream server (the leader's
// only), and the cache events that change the model. nil when the
// cluster runs no gateway.
func startEastWest(ctx context.Context, mgr ctrl.Manager, o Options, status *export.StatusWatcher, log *slog.Logger) (*eastwest.Gateway, error) {
	ew := o.EastWest
	if ew.Service == "" {
		return nil, nil
	}
	svc, _ := ew.service() // checked by Validate
	r, _ := ports.ParseRange(ew.Ports)
	caFile := ew.CAFile
	if caFile == "" {
		caFile = o.Registry.CAFile
	}
	files, err := certfiles.Load(certfiles.Files{CertFile: ew.CertFile, KeyFile: ew.KeyFile, CAFile: caFile, Component: "eastwest-model-stream", Usage: "serving", Log: log})
	if err != nil {
		return nil, fmt.Errorf("--eastwest-model-cert-file/--eastwest-model-key-file/--eastwest-model-ca-file: %w", err)
	}
	go files.Run(ctx, 0)
	creds := (&tlsrefusal.Observer{Server: "eastwest-model-stream", Log: log}).Credentials(credentials.NewTLS(files.ServerConfig(true)))
	srv := grpc.NewServer(append(recovered.GRPCServerOptions("eastwest-model-stream", log), grpc.Creds(creds))...)
	dist := distribute.NewServer(log)
	pub := &eastwest.Publisher{Server: dist, Reader: mgr.GetClient(), Log: log, Resolve: resolveHost,
		Status: func(ns, name string) (*registryv1.ExportStatus, bool) {
			return status.Status(publish.ExportKey{Namespace: ns, Name: name})
		}}
	status.Changed = pub.Kick
	if err := mgr.Add(pub); err != nil {
		return nil, err
	}
	if err := mgr.Add(leaderRunnable(func(ctx context.Context) error {
		return dist.Serve(ctx, ew.ModelListen, srv, "--eastwest-model-listen", log)
	})); err != nil {
		return nil, err
	}
	// This cluster's exports, their Services and endpoints make the
	// model's receiving side.
	for _, obj := range []ctrlclient.Object{&mcsv1beta1.ServiceExport{}, &corev1.Service{}, &discoveryv1.EndpointSlice{}} {
		inf, err := mgr.GetCache().GetInformer(ctx, obj)
		if err != nil {
			return nil, err
		}
		kick := func(any) { pub.Kick() }
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: kick, DeleteFunc: kick,
			UpdateFunc: func(any, any) { pub.Kick() }}); err != nil {
			return nil, err
		}
	}
	log.Info("feeding the east-west gateway", "service", svc.String(), "ports", ew.Ports, "modelListen", ew.ModelListen, "address", ew.Address)
	return &eastwest.Gateway{Service: svc, Ports: &eastwest.Allocator{Range: r}, Publisher: pub}, nil
}

// resolveHost resolves a gateway published by name, within a few seconds.
func resolveHost(host string) (netip.Addr, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.Addr{}, err
	}
	if len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("%s has no address", host)
	}
	return addrs[0], nil
}

// leaderRunnable runs only while this process leads.
type leaderRunnable func(ctx context.Context) error

func (f leaderRunnable) Start(ctx context.Context) error { return f(ctx) }
func (leaderRunnable) NeedLeaderElection() bool          { return true }
