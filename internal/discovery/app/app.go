// Package app assembles the fleetnet-discovery process: flags, the pool
// source, the store, the HTTP API with TLS and authentication, metrics,
// probes and graceful shutdown.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/fleetnet/fleetnet/internal/certfiles"
	"github.com/fleetnet/fleetnet/internal/discovery/kubesource"
	"github.com/fleetnet/fleetnet/internal/discovery/memory"
	"github.com/fleetnet/fleetnet/internal/discovery/server"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
	"github.com/fleetnet/fleetnet/internal/httplimits"
	"github.com/fleetnet/fleetnet/internal/httpserve"
	registryclient "github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/fleetnet/fleetnet/internal/skewcheck"
	"github.com/fleetnet/fleetnet/internal/tlsrefusal"
	"github.com/fleetnet/fleetnet/internal/tokenfile"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Options are fleetnet-discovery's flags.
type Options struct {
	Listen     string
	PoolSource string

	LeaseTTL          time.Duration
	RegistrationGrace time.Duration
	// MaxRegistrations caps the live registrations of one identity.
	MaxRegistrations int
	Routers          []string

	// Kubeconfig and Context select the cluster of the kubernetes source;
	// an empty Kubeconfig means in-cluster, then $KUBECONFIG.
	Kubeconfig     string
	Context        string
	SliceSelection string
	RoutersService string
	ClusterName    string
	PoolLabels     string

	// Registry is how the registry source reaches the registry.
	Registry registryclient.Options

	History          int
	WatchBuffer      int
	BookmarkInterval time.Duration

	TokensFile   string
	TLSCertFile  string
	TLSKeyFile   string
	ClientCAFile string

	MetricsAddr string
	HealthAddr  string

	// Clients bounds what the API's clients may take.
	Clients httplimits.Limits
}

// BindFlags registers the options on fs.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", ":7480", "address of the HTTP API (/v1/); HTTPS with --tls-cert-file")
	fs.StringVar(&o.PoolSource, "pool-source", "memory", "where pools come from: "+strings.Join(sourceNames(), ", ")+" (memory: leased registrations through the API)")
	fs.DurationVar(&o.LeaseTTL, "lease-ttl", 30*time.Second, "memory: how long a registration lives without a renewal, unless it names its own ttlSeconds")
	fs.DurationVar(&o.RegistrationGrace, "registration-grace", 30*time.Second, "memory: after a start, how long readiness (and watches) wait for a first registration before serving an empty set; keep it at least --lease-ttl so that registrants are back")
	fs.IntVar(&o.MaxRegistrations, "max-registrations-per-identity", memory.DefaultMaxPerOwner, "memory: the most live registrations one identity (a token, a certificate) may hold; more are refused with 429 and counted in fleetnet_discovery_registrations_refused_total")
	fs.StringSliceVar(&o.Routers, "routers", nil, "memory, registry: the router replicas, each INSTANCE=ADDRESS:PORT[?cluster=C&region=R&zone=Z&port-name=N&protocol=P] (port name default http, protocol TCP)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubernetes: kubeconfig of the cluster whose imported EndpointSlices are served; empty means in-cluster, then $KUBECONFIG")
	fs.StringVar(&o.Context, "context", "", "kubernetes: kubeconfig context; empty means its current context")
	fs.StringVar(&o.SliceSelection, "slice-selection", string(kubesource.SelectionMCS), "kubernetes: which EndpointSlices are imported ones: mcs (labels multicluster.kubernetes.io/service-name and /source-cluster) or karmada (Karmada's derived slices)")
	fs.StringVar(&o.RoutersService, "routers-service", "", "kubernetes: NAMESPACE/NAME of the Service whose EndpointSlices are the router replicas; empty serves none")
	fs.StringVar(&o.PoolLabels, "pool-labels", "serviceimports", "kubernetes: where pools' labels come from: serviceimports (the ServiceImport of each pool, read with list and watch; the exporters' spec.exportedLabels with fleetnet) or none")
	fs.StringVar(&o.ClusterName, "cluster-name", "", "kubernetes: the name of the cluster read, given to the router replicas")
	fs.StringVar(&o.Registry.Address, "registry", "", "registry: the fleet registry's address host:port, or several replicas' host:port,host:port")
	fs.StringVar(&o.Registry.CAFile, "registry-ca-file", "", "registry: CA bundle that signed the registry's certificate")
	fs.StringVar(&o.Registry.CertFile, "registry-cert-file", "", "registry: an administrator's client certificate (organization fleetnet:admins): the source reads every export's status to apply its scope to each caller")
	fs.StringVar(&o.Registry.KeyFile, "registry-key-file", "", "registry: client key")
	fs.StringVar(&o.Registry.TokenFile, "registry-token-file", "", "registry: file holding an administrator's bearer token, instead of a client certificate; read at each call, so a rotated token is used at once")
	fs.IntVar(&o.History, "history", store.DefaultHistory, "how many changes, at least, are kept for watches to resume from; an older revision gets a fresh snapshot")
	fs.IntVar(&o.WatchBuffer, "watch-buffer", store.DefaultBuffer, "how many changes a watcher may lag behind before it is disconnected (it then resumes from its last revision)")
	fs.DurationVar(&o.BookmarkInterval, "watch-bookmark-interval", 30*time.Second, "how long a watch stays silent before it gets a bookmark (a keepalive carrying the revision)")
	fs.StringVar(&o.TokensFile, "tokens-file", "", "CSV of token,name,role (role: read or register); bearer tokens are accepted when set")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "serving certificate; empty serves plain HTTP (for loopback only)")
	fs.StringVar(&o.TLSKeyFile, "tls-key-file", "", "serving key")
	fs.StringVar(&o.ClientCAFile, "client-ca-file", "", "the fleet CA: client certificates it signed are accepted, the role coming from their organization (needs --tls-cert-file)")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":9090", "address of /metrics; empty disables")
	fs.StringVar(&o.HealthAddr, "health-addr", ":9091", "address of /healthz and /readyz (ready once the pool source is synced); empty disables")
	o.Clients.BindFlags(fs)
}

// Validate checks the flags before anything starts; every error names its
// flag and value.
func (o *Options) Validate() error {
	var errs []error
	for _, a := range []struct{ flag, value string }{{"--listen", o.Listen}, {"--metrics-addr", o.MetricsAddr}, {"--health-addr", o.HealthAddr}} {
		if a.value == "" && a.flag != "--listen" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.value); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", a.flag, a.value, err))
		}
	}
	if _, ok := sources[o.PoolSource]; !ok {
		errs = append(errs, fmt.Errorf("--pool-source=%q: unknown; one of %s", o.PoolSource, strings.Join(sourceNames(), ", ")))
	}
	if o.LeaseTTL < time.Second || o.LeaseTTL > memory.MaxTTL {
		errs = append(errs, fmt.Errorf("--lease-ttl=%s: must be from 1s to %s", o.LeaseTTL, memory.MaxTTL))
	}
	if o.MaxRegistrations < 1 {
		errs = append(errs, fmt.Errorf("--max-registrations-per-identity=%d: must be at least 1", o.MaxRegistrations))
	}
	if o.RegistrationGrace < 0 {
		errs = append(errs, fmt.Errorf("--registration-grace=%s: must not be negative", o.RegistrationGrace))
	}
	if _, err := ParseRouters(o.Routers); err != nil {
		errs = append(errs, err)
	}
	if len(o.Routers) > 0 && o.PoolSource == "kubernetes" {
		errs = append(errs, fmt.Errorf("--routers: a static list is for --pool-source=memory or registry; %q finds router replicas itself (--routers-service)", o.PoolSource))
	}
	errs = append(errs, o.validateRegistry()...)
	errs = append(errs, o.validateKubernetes()...)
	if o.History < 1 {
		errs = append(errs, fmt.Errorf("--history=%d: must be at least 1", o.History))
	}
	if o.WatchBuffer < 16 {
		errs = append(errs, fmt.Errorf("--watch-buffer=%d: must be at least 16", o.WatchBuffer))
	}
	if o.BookmarkInterval < time.Second {
		errs = append(errs, fmt.Errorf("--watch-bookmark-interval=%s: must be at least 1s", o.BookmarkInterval))
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		errs = append(errs, fmt.Errorf("--tls-cert-file=%q and --tls-key-file=%q: give both or neither", o.TLSCertFile, o.TLSKeyFile))
	}
	if o.ClientCAFile != "" && o.TLSCertFile == "" {
		errs = append(errs, fmt.Errorf("--client-ca-file=%q: client certificates need TLS: set --tls-cert-file and --tls-key-file", o.ClientCAFile))
	}
	if o.TokensFile == "" && o.ClientCAFile == "" {
		errs = append(errs, errors.New("no authentication: set --tokens-file, --client-ca-file or both"))
	}
	errs = append(errs, o.Clients.Validate())
	return errors.Join(errs...)
}

// validateKubernetes checks the kubernetes source's flags, which other
// sources refuse so that a mistyped --pool-source is not silently ignored.
func (o *Options) validateKubernetes() []error {
	var errs []error
	if o.PoolSource != "kubernetes" {
		for _, f := range []struct{ flag, value, def string }{
			{"--kubeconfig", o.Kubeconfig, ""}, {"--context", o.Context, ""}, {"--routers-service", o.RoutersService, ""},
			{"--cluster-name", o.ClusterName, ""}, {"--slice-selection", o.SliceSelection, string(kubesource.SelectionMCS)},
			{"--pool-labels", o.PoolLabels, "serviceimports"},
		} {
			if f.value != f.def {
				errs = append(errs, fmt.Errorf("%s=%q: only for --pool-source=kubernetes", f.flag, f.value))
			}
		}
		return errs
	}
	if !slices.Contains(kubesource.Selections, kubesource.Selection(o.SliceSelection)) {
		errs = append(errs, fmt.Errorf("--slice-selection=%q: one of mcs, karmada", o.SliceSelection))
	}
	if o.PoolLabels != "serviceimports" && o.PoolLabels != "none" {
		errs = append(errs, fmt.Errorf("--pool-labels=%q: serviceimports or none", o.PoolLabels))
	}
	if o.RoutersService != "" {
		if _, err := parseService(o.RoutersService); err != nil {
			errs = append(errs, fmt.Errorf("--routers-service=%q: %w", o.RoutersService, err))
		}
	}
	if o.ClusterName != "" {
		if msgs := validation.IsDNS1123Label(o.ClusterName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--cluster-name=%q: %s", o.ClusterName, msgs[0]))
		}
	}
	return errs
}

// validateRegistry checks the registry source's flags, which other sources
// refuse.
func (o *Options) validateRegistry() []error {
	var errs []error
	r := o.Registry
	if o.PoolSource != "registry" {
		for _, f := range []struct{ flag, value string }{
			{"--registry", r.Address}, {"--registry-ca-file", r.CAFile}, {"--registry-cert-file", r.CertFile},
			{"--registry-key-file", r.KeyFile}, {"--registry-token-file", r.TokenFile},
		} {
			if f.value != "" {
				errs = append(errs, fmt.Errorf("%s=%q: only for --pool-source=registry", f.flag, f.value))
			}
		}
		return errs
	}
	if r.Address == "" {
		errs = append(errs, errors.New("--registry: required with --pool-source=registry"))
	} else if _, _, err := net.SplitHostPort(r.Address); err != nil {
		errs = append(errs, fmt.Errorf("--registry=%q: %w", r.Address, err))
	}
	if r.CAFile == "" {
		errs = append(errs, errors.New("--registry-ca-file: required with --pool-source=registry"))
	}
	if (r.CertFile == "") != (r.KeyFile == "") {
		errs = append(errs, fmt.Errorf("--registry-cert-file=%q and --registry-key-file=%q: give both or neither", r.CertFile, r.KeyFile))
	}
	switch {
	case r.CertFile == "" && r.TokenFile == "":
		errs = append(errs, errors.New("--registry-cert-file or --registry-token-file: the registry needs a client identity"))
	case r.CertFile != "" && r.TokenFile != "":
		errs = append(errs, fmt.Errorf("--registry-cert-file=%q and --registry-token-file=%q: give one", r.CertFile, r.TokenFile))
	}
	return errs
}

// parseService parses NAMESPACE/NAME.
func parseService(s string) (store.Key, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok {
		return store.Key{}, errors.New("want NAMESPACE/NAME")
	}
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		return store.Key{}, fmt.Errorf("namespace %q: %s", ns, msgs[0])
	}
	if msgs := validation.IsDNS1035Label(name); len(msgs) > 0 {
		return store.Key{}, fmt.Errorf("name %q: %s", name, msgs[0])
	}
	return store.Key{Namespace: ns, Name: name}, nil
}

// Run serves until ctx ends, then shuts down: watches are ended (clients
// resume from their last revision elsewhere or after the restart) and
// requests in flight finish.
func Run(ctx context.Context, o Options, log *slog.Logger) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if log == nil {
		log = slog.Default()
	}
	tlsConfig, authn, err := o.security(ctx, log)
	if err != nil {
		return err
	}
	if tlsConfig == nil {
		log.Warn("serving plain HTTP: bearer tokens cross the network in clear; set --tls-cert-file outside loopback")
	}
	promReg := prometheus.NewRegistry()
	promReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), tlsrefusal.HandshakeErrors, certfiles.Expiry)
	if err := skewcheck.Register(promReg); err != nil {
		return err
	}
	// Revisions start at the start time, so that a client resuming across
	// a restart (which starts from empty) is told to reset; see
	// store.Options.Base.
	st := store.New(store.Options{History: o.History, Buffer: o.WatchBuffer, Base: time.Now().UnixMicro()})
	routers, _ := ParseRouters(o.Routers)
	src, err := sources[o.PoolSource](SourceEnv{Options: &o, Store: st, Log: log, Registerer: promReg, Routers: routers})
	if err != nil {
		return fmt.Errorf("--pool-source=%s: %w", o.PoolSource, err)
	}
	cfg := server.Config{
		Store: st, Backend: src, SourceName: o.PoolSource, Auth: authn, Log: log, Registerer: promReg,
		BookmarkInterval: o.BookmarkInterval,
	}
	if r, ok := src.(server.Registrar); ok {
		cfg.Registrar = r
	}
	api := server.New(cfg)

	// The client limits close slow clients on time and cap connections;
	// watches bound each of their writes themselves.
	servers, err := httpserve.Listen("discovery", o.Clients, log,
		httpserve.Endpoint{Flag: "--listen", Addr: o.Listen, Handler: api.Handler(), TLS: tlsConfig},
		httpserve.Endpoint{Flag: "--metrics-addr", Addr: o.MetricsAddr, Handler: promhttp.HandlerFor(promReg, promhttp.HandlerOpts{})},
		httpserve.Endpoint{Flag: "--health-addr", Addr: o.HealthAddr, Handler: api.Probes()},
	)
	if err != nil {
		return err
	}
	log.Info("discovery serving", "address", servers.Addr("--listen").String(), "pool-source", o.PoolSource, "tls", tlsConfig != nil, "tokens", o.TokensFile != "", "client-certificates", o.ClientCAFile != "")

	errc := make(chan error, servers.Len()+1)
	servers.Serve(errc)
	srcCtx, stopSource := context.WithCancel(context.Background())
	srcDone := make(chan struct{})
	go func() {
		defer close(srcDone)
		if err := src.Run(srcCtx); err != nil {
			errc <- fmt.Errorf("pool source %s: %w", o.PoolSource, err)
		}
	}()

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	log.Info("discovery shutting down")
	api.Stop()
	servers.Shutdown(10 * time.Second)
	stopSource()
	<-srcDone
	return runErr
}

// security loads TLS (reloaded when its files change, until ctx ends) and
// authentication from the flags.
func (o *Options) security(ctx context.Context, log *slog.Logger) (*tls.Config, *server.Authenticator, error) {
	authn := &server.Authenticator{}
	if o.TokensFile != "" {
		tokens, err := server.LoadTokens(o.TokensFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--tokens-file=%s: %w", o.TokensFile, err)
		}
		authn.Tokens = tokens
		tokenfile.Watch(ctx, o.TokensFile, 0, func() error {
			tokens, err := server.LoadTokens(o.TokensFile)
			if err == nil {
				authn.SetTokens(tokens)
			}
			return err
		}, log)
	}
	if o.TLSCertFile == "" {
		return nil, authn, nil
	}
	files, err := certfiles.Load(certfiles.Files{CertFile: o.TLSCertFile, KeyFile: o.TLSKeyFile, CAFile: o.ClientCAFile,
		Component: "discovery", Usage: "serving", Log: log})
	if err != nil {
		return nil, nil, fmt.Errorf("--tls-cert-file/--tls-key-file/--client-ca-file: %w", err)
	}
	go files.Run(ctx, 0)
	// Without tokens a client certificate is the only way in, so the
	// handshake demands one (with a client CA; without, tokens only).
	return files.ServerConfig(o.TokensFile == ""), authn, nil
}

func sourceNames() []string { return slices.Sorted(maps.Keys(sources)) }
