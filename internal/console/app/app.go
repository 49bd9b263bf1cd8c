// Package app assembles the fleetnet-console process: flags, the three
// feeds (registry, hub, edges) into one model, the web UI and its API
// with TLS and authentication, metrics, probes and graceful shutdown.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/fleetnet/fleetnet/internal/certfiles"
	"github.com/fleetnet/fleetnet/internal/console/edgefeed"
	"github.com/fleetnet/fleetnet/internal/console/hubfeed"
	"github.com/fleetnet/fleetnet/internal/console/model"
	"github.com/fleetnet/fleetnet/internal/console/registryfeed"
	"github.com/fleetnet/fleetnet/internal/console/server"
	"github.com/fleetnet/fleetnet/internal/discovery/kubesource"
	"github.com/fleetnet/fleetnet/internal/httplimits"
	"github.com/fleetnet/fleetnet/internal/httpserve"
	registryclient "github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/fleetnet/fleetnet/internal/skewcheck"
	"github.com/fleetnet/fleetnet/internal/tlsrefusal"
	"github.com/fleetnet/fleetnet/internal/tokenfile"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Options are fleetnet-console's flags.
type Options struct {
	Listen string

	// Registry is how the console reaches the registry: an administrator's
	// identity, which may list everything.
	Registry registryclient.Options

	// Hub says whether the hub's entry points are read; Kubeconfig and
	// Context select the hub (empty Kubeconfig: in-cluster, then
	// $KUBECONFIG).
	Hub        bool
	Kubeconfig string
	Context    string

	// EdgeMetrics are the edges' metrics URLs.
	EdgeMetrics []string

	ClustersEvery time.Duration
	ExportsEvery  time.Duration
	EdgeEvery     time.Duration

	TokensFile   string
	TLSCertFile  string
	TLSKeyFile   string
	ClientCAFile string
	SessionTTL   time.Duration

	MetricsAddr string
	HealthAddr  string

	Clients httplimits.Limits
}

// BindFlags registers the options on fs.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:7490", "address of the web UI; plain HTTP only on a loopback address (as behind kubectl port-forward), HTTPS with --tls-cert-file")
	fs.StringVar(&o.Registry.Address, "registry", "", "the fleet registry's address host:port, or several replicas' host:port,host:port")
	fs.StringVar(&o.Registry.CAFile, "registry-ca-file", "", "CA bundle that signed the registry's certificate")
	fs.StringVar(&o.Registry.CertFile, "registry-cert-file", "", "client certificate of an administrator (organization fleetnet:admins): the console lists every cluster's exports")
	fs.StringVar(&o.Registry.KeyFile, "registry-key-file", "", "client key")
	fs.StringVar(&o.Registry.TokenFile, "registry-token-file", "", "file holding an administrator's bearer token, instead of a client certificate")
	fs.BoolVar(&o.Hub, "hub", true, "read the hub's Gateways, HTTPRoutes, MultiClusterLoadBalancers and BackendTrafficPolicies (list and watch)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the hub; empty means in-cluster, then $KUBECONFIG")
	fs.StringVar(&o.Context, "context", "", "kubeconfig context; empty means its current context")
	fs.StringSliceVar(&o.EdgeMetrics, "edge-metrics", nil, "the fleetnet-edges' metrics URLs (http://HOST:PORT/metrics), comma-separated: the live traffic split")
	fs.DurationVar(&o.ClustersEvery, "clusters-interval", time.Second, "how often the registry's clusters and leases are listed")
	fs.DurationVar(&o.ExportsEvery, "exports-interval", 3*time.Second, "how often the registry's exports and their statuses are listed")
	fs.DurationVar(&o.EdgeEvery, "edge-interval", 2*time.Second, "how often the edges' metrics are read (the live split's interval)")
	fs.StringVar(&o.TokensFile, "tokens-file", "", "CSV of token,name,read: bearer tokens, and login tokens for a browser (URL ?token=), exchanged for a session cookie")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "serving certificate; empty serves plain HTTP (loopback only)")
	fs.StringVar(&o.TLSKeyFile, "tls-key-file", "", "serving key")
	fs.StringVar(&o.ClientCAFile, "client-ca-file", "", "the fleet CA: client certificates it signed of organization fleetnet:console or fleetnet:admins may look; a member cluster's or an edge's is refused (needs --tls-cert-file)")
	fs.DurationVar(&o.SessionTTL, "session-ttl", server.DefaultSessionTTL, "how long a browser's session lasts after its login")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":9090", "address of /metrics; empty disables")
	fs.StringVar(&o.HealthAddr, "health-addr", ":9091", "address of /healthz and /readyz (ready once the registry's snapshot is in); empty disables")
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
	if o.TLSCertFile == "" && !loopback(o.Listen) {
		errs = append(errs, fmt.Errorf("--listen=%q: plain HTTP is served on a loopback address only (e.g. 127.0.0.1:7490, reached through kubectl port-forward); set --tls-cert-file and --tls-key-file to listen elsewhere", o.Listen))
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
	r := o.Registry
	if r.Address == "" {
		errs = append(errs, errors.New("--registry: required"))
	} else if _, err := registryclient.SplitAddresses(r.Address); err != nil {
		errs = append(errs, fmt.Errorf("--registry=%q: %w", r.Address, err))
	}
	if r.CAFile == "" {
		errs = append(errs, errors.New("--registry-ca-file: required"))
	}
	if (r.CertFile == "") != (r.KeyFile == "") {
		errs = append(errs, fmt.Errorf("--registry-cert-file=%q and --registry-key-file=%q: give both or neither", r.CertFile, r.KeyFile))
	}
	switch {
	case r.CertFile == "" && r.TokenFile == "":
		errs = append(errs, errors.New("--registry-cert-file or --registry-token-file: the registry needs an administrator's identity"))
	case r.CertFile != "" && r.TokenFile != "":
		errs = append(errs, fmt.Errorf("--registry-cert-file=%q and --registry-token-file=%q: give one", r.CertFile, r.TokenFile))
	}
	if !o.Hub && (o.Kubeconfig != "" || o.Context != "") {
		errs = append(errs, fmt.Errorf("--kubeconfig=%q --context=%q: only with --hub", o.Kubeconfig, o.Context))
	}
	for _, u := range o.EdgeMetrics {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, fmt.Errorf("--edge-metrics=%q: want http(s)://HOST:PORT/metrics", u))
		}
	}
	for _, d := range []struct {
		flag     string
		value    time.Duration
		min, max time.Duration
	}{
		{"--clusters-interval", o.ClustersEvery, 200 * time.Millisecond, time.Minute},
		{"--exports-interval", o.ExportsEvery, 500 * time.Millisecond, 10 * time.Minute},
		{"--edge-interval", o.EdgeEvery, 500 * time.Millisecond, time.Minute},
		{"--session-ttl", o.SessionTTL, time.Minute, 30 * 24 * time.Hour},
	} {
		if d.value < d.min || d.value > d.max {
			errs = append(errs, fmt.Errorf("%s=%s: must be from %s to %s", d.flag, d.value, d.min, d.max))
		}
	}
	errs = append(errs, o.Clients.Validate())
	return errors.Join(errs...)
}

// loopback says whether addr's host is a loopback address or localhost.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Run serves until ctx ends, then shuts down.
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
	promReg := prometheus.NewRegistry()
	promReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), tlsrefusal.HandshakeErrors, certfiles.Expiry)
	if err := skewcheck.Register(promReg); err != nil {
		return err
	}

	// controller-runtime's caches (the hub feed) log through the same
	// logger.
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))
	m := model.New()
	o.Registry.Component = "console-registry-client"
	o.Registry.Log = log
	rc, conn, err := registryclient.Dial(o.Registry)
	if err != nil {
		return fmt.Errorf("--registry=%s: %w", o.Registry.Address, err)
	}
	defer conn.Close()
	type feed struct {
		name string
		run  func(context.Context) error
	}
	feeds := []feed{{model.FeedRegistry, registryfeed.New(registryfeed.Config{
		Client: rc, Model: m, Log: log.With("feed", model.FeedRegistry), ClustersEvery: o.ClustersEvery, ExportsEvery: o.ExportsEvery,
	}).Run}}
	if o.Hub {
		cfg, err := kubesource.RESTConfig(o.Kubeconfig, o.Context)
		if err != nil {
			return fmt.Errorf("--kubeconfig=%q --context=%q: %w", o.Kubeconfig, o.Context, err)
		}
		cfg.UserAgent = "fleetnet-console"
		feeds = append(feeds, feed{model.FeedHub, hubfeed.New(hubfeed.Config{Rest: cfg, Model: m, Log: log.With("feed", model.FeedHub)}).Run})
	} else {
		m.SetFeed(model.FeedHub, model.Feed{Synced: true, Error: "not read (--hub=false)"})
	}
	if len(o.EdgeMetrics) > 0 {
		feeds = append(feeds, feed{model.FeedEdge, edgefeed.New(edgefeed.Config{URLs: o.EdgeMetrics, Model: m, Log: log.With("feed", model.FeedEdge), Every: o.EdgeEvery}).Run})
	} else {
		m.SetFeed(model.FeedEdge, model.Feed{Synced: true, Error: "not read (no --edge-metrics)"})
	}

	ui := server.New(server.Config{Model: m, Auth: authn, Log: log, SecureCookies: tlsConfig != nil, Registerer: promReg})
	// No write timeout: the event streams are long-lived.
	servers, err := httpserve.Listen("console", o.Clients, log,
		httpserve.Endpoint{Flag: "--listen", Addr: o.Listen, Handler: ui.Handler(), TLS: tlsConfig},
		httpserve.Endpoint{Flag: "--metrics-addr", Addr: o.MetricsAddr, Handler: promhttp.HandlerFor(promReg, promhttp.HandlerOpts{})},
		httpserve.Endpoint{Flag: "--health-addr", Addr: o.HealthAddr, Handler: ui.Probes()},
	)
	if err != nil {
		return err
	}
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	log.Info("console serving", "url", scheme+"://"+servers.Addr("--listen").String()+"/", "registry", o.Registry.Address, "hub", o.Hub,
		"edges", len(o.EdgeMetrics), "tokens", o.TokensFile != "", "client-certificates", o.ClientCAFile != "")

	errc := make(chan error, servers.Len()+len(feeds))
	servers.Serve(errc)
	feedCtx, stopFeeds := context.WithCancel(context.Background())
	defer stopFeeds()
	for _, f := range feeds {
		go func() {
			if err := f.run(feedCtx); err != nil {
				errc <- fmt.Errorf("%s feed: %w", f.name, err)
			}
		}()
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	log.Info("console shutting down")
	ui.Stop()
	servers.Shutdown(10 * time.Second)
	stopFeeds()
	return runErr
}

// security loads TLS (reloaded when its files change, until ctx ends) and
// the tokens (reloaded likewise).
func (o *Options) security(ctx context.Context, log *slog.Logger) (*tls.Config, *server.Authenticator, error) {
	authn := server.NewAuthenticator(o.SessionTTL)
	if o.TokensFile != "" {
		load := func() error {
			entries, err := tokenfile.Load(o.TokensFile, server.RoleRead)
			if err == nil {
				authn.SetTokens(entries)
			}
			return err
		}
		if err := load(); err != nil {
			return nil, nil, fmt.Errorf("--tokens-file=%s: %w", o.TokensFile, err)
		}
		tokenfile.Watch(ctx, o.TokensFile, 0, load, log)
	}
	if o.TLSCertFile == "" {
		return nil, authn, nil
	}
	files, err := certfiles.Load(certfiles.Files{CertFile: o.TLSCertFile, KeyFile: o.TLSKeyFile, CAFile: o.ClientCAFile,
		Component: "console", Usage: "serving", Log: log})
	if err != nil {
		return nil, nil, fmt.Errorf("--tls-cert-file/--tls-key-file/--client-ca-file: %w", err)
	}
	go files.Run(ctx, 0)
	// Without tokens a client certificate is the only way in.
	return files.ServerConfig(o.TokensFile == ""), authn, nil
}

// LoginURL is the URL a browser opens to log in with token.
func LoginURL(base, token string) string {
	return strings.TrimSuffix(base, "/") + "/?token=" + url.QueryEscape(token)
}
