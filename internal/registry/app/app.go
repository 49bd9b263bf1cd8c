// Package app assembles the fleetnet-registry process: flags, storage
// (embedded or external etcd), TLS, the gRPC server, metrics and graceful
// shutdown.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/fleetnet/fleetnet/internal/certfiles"
	"github.com/fleetnet/fleetnet/internal/registry/auth"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/registry/store"
	"github.com/fleetnet/fleetnet/internal/tokenfile"
	"github.com/fleetnet/fleetnet/internal/tracing"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Options are the registry's flags.
type Options struct {
	Listen        string
	MetricsListen string
	DataDir       string
	EtcdEndpoints string
	EtcdPrefix    string
	EtcdCAFile    string
	EtcdCertFile  string
	EtcdKeyFile   string
	TLSCertFile   string
	TLSKeyFile    string
	ClientCAFile  string
	TokenFile     string
	LeaseTTL      time.Duration
	GracePeriod   time.Duration
	// MaxWatchesPerIdentity and MaxWatches cap the watches open at once
	// of one identity and of all (server.Config).
	MaxWatchesPerIdentity int
	MaxWatches            int
	// WatcherBufferBytes is how far a watcher may fall behind, in bytes,
	// before it is cut off and resumes.
	WatcherBufferBytes int
	// Tracing sends traces of writes and fan-outs to an OTLP collector
	// (off by default).
	Tracing tracing.Options
}

// BindFlags registers the options on fs.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", ":7443", "address of the gRPC API (TLS)")
	fs.StringVar(&o.MetricsListen, "metrics-listen", ":8080", "address of /metrics, /healthz and /readyz (plain HTTP); empty disables")
	fs.StringVar(&o.DataDir, "data-dir", "fleetnet-registry-data", "directory of the embedded etcd; unused with --etcd-endpoints")
	fs.StringVar(&o.EtcdEndpoints, "etcd-endpoints", "", "comma-separated URLs of an external etcd cluster; replicas on one etcd serve the same view")
	fs.StringVar(&o.EtcdPrefix, "etcd-prefix", "/fleetnet/registry/", "key prefix in etcd")
	fs.StringVar(&o.EtcdCAFile, "etcd-ca-file", "", "CA bundle of the external etcd")
	fs.StringVar(&o.EtcdCertFile, "etcd-cert-file", "", "client certificate for the external etcd")
	fs.StringVar(&o.EtcdKeyFile, "etcd-key-file", "", "client key for the external etcd")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "serving certificate (required)")
	fs.StringVar(&o.TLSKeyFile, "tls-key-file", "", "serving key (required)")
	fs.StringVar(&o.ClientCAFile, "client-ca-file", "", "fleet CA that signs cluster and admin client certificates (required)")
	fs.StringVar(&o.TokenFile, "token-file", "", "CSV of token,name,role (role: cluster or admin); when set, bearer tokens are accepted besides client certificates")
	fs.DurationVar(&o.LeaseTTL, "lease-ttl", 30*time.Second, "how long a cluster stays live without renewing its lease")
	fs.DurationVar(&o.GracePeriod, "grace-period", 10*time.Minute, "how long the records of a cluster whose lease expired are kept")
	fs.IntVar(&o.MaxWatchesPerIdentity, "max-watches-per-identity", server.DefaultMaxWatchesPerIdentity, "watches one identity (a cluster or an administrator) may hold open at once; more are refused with ResourceExhausted (an agent holds two)")
	fs.IntVar(&o.MaxWatches, "max-watches", server.DefaultMaxWatches, "watches the registry holds open at once, of every identity; more are refused with ResourceExhausted")
	fs.IntVar(&o.WatcherBufferBytes, "watcher-buffer-bytes", server.DefaultWatcherBufferBytes, "bytes of events a watcher may fall behind before it is cut off and resumes from its last revision")
	o.Tracing.BindFlags(fs)
}

// Validate checks the options before anything starts.
func (o *Options) Validate() error {
	var errs []error
	for flagName, v := range map[string]string{"--tls-cert-file": o.TLSCertFile, "--tls-key-file": o.TLSKeyFile, "--client-ca-file": o.ClientCAFile} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is required (create one with `fleetnetctl certs`)", flagName))
		}
	}
	if o.LeaseTTL < time.Second {
		errs = append(errs, fmt.Errorf("--lease-ttl=%s: must be at least 1s", o.LeaseTTL))
	}
	if o.GracePeriod < 0 {
		errs = append(errs, fmt.Errorf("--grace-period=%s: must not be negative", o.GracePeriod))
	}
	for _, f := range []struct {
		name  string
		value int
	}{{"--max-watches-per-identity", o.MaxWatchesPerIdentity}, {"--max-watches", o.MaxWatches}, {"--watcher-buffer-bytes", o.WatcherBufferBytes}} {
		if f.value < 1 {
			errs = append(errs, fmt.Errorf("%s=%d: must be at least 1", f.name, f.value))
		}
	}
	if o.MaxWatchesPerIdentity > o.MaxWatches {
		errs = append(errs, fmt.Errorf("--max-watches-per-identity=%d: must not exceed --max-watches=%d", o.MaxWatchesPerIdentity, o.MaxWatches))
	}
	return errors.Join(errs...)
}

// Run serves until ctx ends, then shuts down gracefully: watchers are told
// to resume from their last revision, in-flight calls finish.
func Run(ctx context.Context, o Options, log *slog.Logger) error {
	if err := o.Validate(); err != nil {
		return err
	}
	tlsConfig, authn, err := o.security(ctx, log)
	if err != nil {
		return err
	}
	st, closeStore, err := o.openStore(ctx, log)
	if err != nil {
		return err
	}
	defer closeStore()

	tp, err := tracing.Setup(ctx, o.Tracing, "fleetnet-registry")
	if err != nil {
		return err
	}
	defer func() {
		// Flushed on the way out, after the last write and fan-out.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("traces not all sent", "err", err)
		}
	}()
	if o.Tracing.Enabled() {
		log.Info("sending traces", "otlpEndpoint", o.Tracing.Endpoint, "insecure", o.Tracing.Insecure)
	}

	promReg := prometheus.NewRegistry()
	promReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), certfiles.Expiry)
	reg := server.New(st, server.Config{LeaseTTL: o.LeaseTTL, GracePeriod: o.GracePeriod,
		MaxWatchesPerIdentity: o.MaxWatchesPerIdentity, MaxWatches: o.MaxWatches, WatcherBufferBytes: o.WatcherBufferBytes,
		Logger: log, Registerer: promReg, TracerProvider: tp})
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	go reg.Run(runCtx)

	gs, health := server.NewGRPCServer(reg, tlsConfig, authn)
	lis, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("--listen=%s: %w", o.Listen, err)
	}
	log.Info("registry serving", "address", lis.Addr().String())
	serveErr := make(chan error, 1)
	go func() { serveErr <- gs.Serve(lis) }()

	var metricsSrv *http.Server
	if o.MetricsListen != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(promReg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
			resp, err := health.Check(r.Context(), &healthpb.HealthCheckRequest{})
			if err != nil || resp.GetStatus().String() != "SERVING" {
				http.Error(w, "registry view not loaded yet", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
		})
		mlis, err := net.Listen("tcp", o.MetricsListen)
		if err != nil {
			gs.Stop()
			return fmt.Errorf("--metrics-listen=%s: %w", o.MetricsListen, err)
		}
		metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go metricsSrv.Serve(mlis)
	}

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("serving gRPC: %w", err)
	}
	log.Info("registry shutting down")
	health.Shutdown()
	reg.Stop()
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		gs.Stop()
	}
	if metricsSrv != nil {
		metricsSrv.Close()
	}
	return nil
}

// security loads TLS (reloaded when its files change, until ctx ends)
// and authentication from the flags.
func (o *Options) security(ctx context.Context, log *slog.Logger) (*tls.Config, *auth.Authenticator, error) {
	files, err := certfiles.Load(certfiles.Files{CertFile: o.TLSCertFile, KeyFile: o.TLSKeyFile, CAFile: o.ClientCAFile,
		Component: "registry", Usage: "serving", Log: log})
	if err != nil {
		return nil, nil, fmt.Errorf("--tls-cert-file/--tls-key-file/--client-ca-file: %w", err)
	}
	go files.Run(ctx, 0)
	authn := &auth.Authenticator{}
	if o.TokenFile != "" {
		if authn.Tokens, err = auth.LoadTokens(o.TokenFile); err != nil {
			return nil, nil, fmt.Errorf("--token-file: %w", err)
		}
		tokenfile.Watch(ctx, o.TokenFile, 0, func() error {
			tokens, err := auth.LoadTokens(o.TokenFile)
			if err == nil {
				authn.SetTokens(tokens)
			}
			return err
		}, log)
	}
	return files.ServerConfig(o.TokenFile == ""), authn, nil
}

func (o *Options) openStore(ctx context.Context, log *slog.Logger) (store.Store, func(), error) {
	if o.EtcdEndpoints == "" {
		e, err := store.StartEmbedded(ctx, o.DataDir, log)
		if err != nil {
			return nil, nil, err
		}
		return store.NewEtcd(e.Client, o.EtcdPrefix), e.Close, nil
	}
	cfg := clientv3.Config{Endpoints: strings.Split(o.EtcdEndpoints, ","), DialTimeout: 10 * time.Second}
	if o.EtcdCAFile != "" || o.EtcdCertFile != "" {
		info := transport.TLSInfo{TrustedCAFile: o.EtcdCAFile, CertFile: o.EtcdCertFile, KeyFile: o.EtcdKeyFile}
		tlsCfg, err := info.ClientConfig()
		if err != nil {
			return nil, nil, fmt.Errorf("etcd TLS flags: %w", err)
		}
		cfg.TLS = tlsCfg
	}
	client, err := clientv3.New(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("--etcd-endpoints=%s: %w", o.EtcdEndpoints, err)
	}
	log.Info("using external etcd", "endpoints", o.EtcdEndpoints, "prefix", o.EtcdPrefix)
	s := store.NewEtcd(client, o.EtcdPrefix)
	return s, func() { s.Close() }, nil
}
