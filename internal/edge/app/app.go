// Package app assembles the fleetnet-edge process: the subscription to
// fleetnet-gateway's models, the data planes that serve them (the HTTP
// proxy for Gateways, the L4 proxy for MultiClusterLoadBalancers, one
// health checker for both), metrics and probes.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/accesslog"
	"github.com/fleetnet/fleetnet/internal/edge/endpointranges"
	"github.com/fleetnet/fleetnet/internal/edge/health"
	"github.com/fleetnet/fleetnet/internal/edge/l4"
	"github.com/fleetnet/fleetnet/internal/edge/proxy"
	"github.com/fleetnet/fleetnet/internal/edge/subscribe"
	"github.com/fleetnet/fleetnet/internal/httplimits"

	"github.com/fleetnet/fleetnet/internal/certfiles"
	"github.com/fleetnet/fleetnet/internal/skewcheck"
	"github.com/fleetnet/fleetnet/internal/tlsrefusal"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Options are the edge's flags.
type Options struct {
	Gateway     string
	CAFile      string
	CertFile    string
	KeyFile     string
	Region      string
	StateDir    string
	ListenHost  string
	MetricsAddr string
	HealthAddr  string
	AccessLog   bool
	// AccessLogBuffer and AccessLogFlush: see internal/edge/accesslog.
	AccessLogBuffer int
	AccessLogFlush  time.Duration
	// NetHTTPOnly turns the HTTP/1.1 fast path off.
	NetHTTPOnly bool
	Clients     httplimits.Limits
	// L4MaxConnections and L4MaxConnectionsPerClient cap the TCP
	// connections of each load balancer port, in all and of one client
	// address (l4.Options); 0 takes l4's default.
	L4MaxConnections, L4MaxConnectionsPerClient int
	// EndpointRanges are the CIDR ranges of the endpoints the edge may
	// dial (endpointranges); none allows every address. The flag's
	// default is endpointranges.Private.
	EndpointRanges []string
	// EastWestListen, when set, gives the edge the east-west role: it
	// carries streams of other clusters' gateways to this cluster's
	// exports there (internal/eastwest), and reaches clusters of other
	// networks through theirs. EastWestCertFile and EastWestKeyFile are
	// the cluster's gateway certificate (pki.EastWestCert), checked
	// against CAFile's fleet CA.
	EastWestListen, EastWestCertFile, EastWestKeyFile string
}

// BindFlags registers the options on fs.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Gateway, "gateway", "", "fleetnet-gateway's model distribution address host:port")
	fs.StringVar(&o.CAFile, "ca-file", "", "the fleet CA, which signed the gateway's certificate")
	fs.StringVar(&o.CertFile, "cert-file", "", "this edge's client certificate (organization fleetnet:edges; the common name is the edge's name)")
	fs.StringVar(&o.KeyFile, "key-file", "", "this edge's client key")
	fs.StringVar(&o.Region, "region", "", "this edge's region, a valid label value (local-first routing prefers its endpoints)")
	fs.StringVar(&o.StateDir, "state-dir", "", "where the last good model is kept, so that a restarted edge serves it before the gateway answers; empty keeps nothing")
	fs.StringVar(&o.ListenHost, "listen-host", "", "address the Gateways' listeners and the MultiClusterLoadBalancers' ports bind; empty means every interface")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":9090", "address of /metrics")
	fs.StringVar(&o.HealthAddr, "health-probe-bind-address", ":9091", "address of /healthz and /readyz (ready once a model is served)")
	fs.BoolVar(&o.AccessLog, "access-log", false, "write a JSON line per request to standard output (the edge's own log is on standard error)")
	fs.IntVar(&o.AccessLogBuffer, "access-log-buffer", 64<<10, "bytes of access log collected before a write, by a goroutine of its own (past 16 times this, lines are dropped and counted rather than slowing requests); 0 writes each line at once")
	fs.DurationVar(&o.AccessLogFlush, "access-log-flush", time.Second, "longest an access log line waits in the buffer")
	fs.BoolVar(&o.NetHTTPOnly, "net-http-only", false, "serve every HTTP request through net/http's server and reverse proxy, without the HTTP/1.1 fast path (a fallback)")
	o.Clients.BindFlags(fs)
	fs.IntVar(&o.L4MaxConnections, "l4-max-connections", l4.DefaultMaxConnsPerPort, "TCP connections of each MultiClusterLoadBalancer port; more are reset when accepted")
	fs.StringSliceVar(&o.EndpointRanges, "endpoint-ranges", endpointranges.Private,
		"CIDR ranges of the endpoints the edge may dial, comma-separated: the member clusters' pod ranges, where they are known. Endpoints outside are left out of the model and counted in fleetnet_edge_endpoints_withheld, so that a member cluster cannot point the edge at its own network or the internet; \"0.0.0.0/0,::/0\" allows every address")
	fs.StringVar(&o.EastWestListen, "eastwest-listen", "", "address of the east-west tunnel listener (HTTP/2 CONNECT over mutual TLS 1.3; other clusters' gateways dial it), e.g. :15008; empty: no east-west role")
	fs.StringVar(&o.EastWestCertFile, "eastwest-cert-file", "", "the cluster's east-west gateway certificate (organization fleetnet:clusters, the cluster's id as common name, server and client usage), with --eastwest-listen")
	fs.StringVar(&o.EastWestKeyFile, "eastwest-key-file", "", "its key")
	fs.IntVar(&o.L4MaxConnectionsPerClient, "l4-max-connections-per-client", l4.DefaultMaxConnsPerClient,
		"TCP connections of one client address on each MultiClusterLoadBalancer port, so that one host cannot take them all; more are reset when accepted (clients behind one NAT share an address)")
}

// Validate checks the flags before anything starts.
func (o *Options) Validate() error {
	var errs []error
	for _, f := range []struct{ name, value string }{{"--gateway", o.Gateway}, {"--ca-file", o.CAFile}, {"--cert-file", o.CertFile}, {"--key-file", o.KeyFile}} {
		if f.value == "" {
			errs = append(errs, fmt.Errorf("%s is required", f.name))
		}
	}
	if o.Gateway != "" {
		if host, _, err := net.SplitHostPort(o.Gateway); err != nil {
			errs = append(errs, fmt.Errorf("--gateway=%q: %w", o.Gateway, err))
		} else if host == "" {
			// The gateway's certificate is verified against the host.
			errs = append(errs, fmt.Errorf("--gateway=%q: no host", o.Gateway))
		}
	}
	errs = append(errs, o.Clients.Validate())
	for _, f := range []struct {
		name  string
		value int
	}{{"--l4-max-connections", o.L4MaxConnections}, {"--l4-max-connections-per-client", o.L4MaxConnectionsPerClient}} {
		if f.value < 0 {
			errs = append(errs, fmt.Errorf("%s=%d: must not be negative (0 takes the default)", f.name, f.value))
		}
	}
	if o.EastWestListen != "" {
		if _, _, err := net.SplitHostPort(o.EastWestListen); err != nil {
			errs = append(errs, fmt.Errorf("--eastwest-listen=%q: %w", o.EastWestListen, err))
		}
		if o.EastWestCertFile == "" || o.EastWestKeyFile == "" {
			errs = append(errs, errors.New("--eastwest-listen needs --eastwest-cert-file and --eastwest-key-file"))
		}
	} else if o.EastWestCertFile != "" || o.EastWestKeyFile != "" {
		errs = append(errs, errors.New("--eastwest-cert-file and --eastwest-key-file are used with --eastwest-listen only"))
	}
	if _, err := endpointranges.Parse(o.EndpointRanges); err != nil {
		errs = append(errs, fmt.Errorf("--endpoint-ranges: %w", err))
	}
	if o.AccessLogBuffer < 0 {
		errs = append(errs, fmt.Errorf("--access-log-buffer=%d: must not be negative", o.AccessLogBuffer))
	}
	for _, msg := range validation.IsValidLabelValue(o.Region) {
		errs = append(errs, fmt.Errorf("--region=%q: %s", o.Region, msg))
	}
	return errors.Join(errs...)
}

// Run serves until ctx ends.
func Run(ctx context.Context, o Options, log *slog.Logger) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if log == nil {
		log = slog.Default()
	}
	ranges, _ := endpointranges.Parse(o.EndpointRanges) // checked by Validate
	log.Info("endpoints the edge may dial", "ranges", ranges.String())
	// Read again when they change (a rotated Secret), until ctx ends.
	files, err := certfiles.Load(certfiles.Files{CertFile: o.CertFile, KeyFile: o.KeyFile, CAFile: o.CAFile, Component: "edge", Usage: "client", Log: log})
	if err != nil {
		return fmt.Errorf("--cert-file/--key-file/--ca-file: %w", err)
	}
	go files.Run(ctx, 0)
	// The gateway's certificate is verified against --gateway's host; the
	// handshakes that fail are counted under the gateway's server name.
	creds := (&tlsrefusal.Observer{Server: "gateway-model-stream", Log: log}).Credentials(files.ClientCredentials())
	// gRPC's default reconnect backoff grows to two minutes: an edge would
	// then follow a gateway that came back long after it did. Models keep
	// being served meanwhile (fail static), so retrying often costs little.
	conn, err := grpc.NewClient(o.Gateway, grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: reconnectBackoff, MinConnectTimeout: 5 * time.Second}))
	if err != nil {
		return fmt.Errorf("--gateway: %w", err)
	}
	defer conn.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), certfiles.Expiry)
	if err := skewcheck.Register(reg); err != nil {
		return err
	}
	checker := health.New()
	defer checker.Close()
	var accessLog *accesslog.Writer
	if o.AccessLog {
		accessLog = accesslog.New(os.Stdout, accesslog.Options{Buffer: o.AccessLogBuffer, Flush: o.AccessLogFlush})
		defer accessLog.Close()
		reg.MustRegister(accesslog.Dropped)
	}
	var ew *eastWest
	if o.EastWestListen != "" {
		if ew, err = startEastWest(ctx, o, reg, log); err != nil {
			return err
		}
		defer ew.stop()
	}
	planes := &dataPlanes{
		eastWest: ew,
		http: proxy.New(proxy.Options{ListenHost: o.ListenHost, Region: o.Region, Log: log, Registerer: reg, AccessLog: accessLog, Health: checker,
			NetHTTPOnly: o.NetHTTPOnly, Clients: o.Clients}),
		l4: l4.New(l4.Options{ListenHost: o.ListenHost, Log: log, Registerer: reg, Health: checker,
			MaxConnsPerPort: o.L4MaxConnections, MaxConnsPerClient: o.L4MaxConnectionsPerClient, Tunnel: ew.tunnel()}),
		log:    log,
		ranges: ranges,
		served: &edgev1.Model{},
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fleetnet_edge_endpoints_withheld",
		Help: "Endpoints of the model served that the edge does not dial, being outside --endpoint-ranges."}, func() float64 {
		return float64(planes.withheld.Load())
	}))
	client := &subscribe.Client{
		Conn: conn, Region: o.Region, StateDir: o.StateDir, Log: log,
		Apply: func(_ context.Context, u *edgev1.ModelUpdate) ([]*edgev1.Refusal, error) {
			m, certs, err := edgev1.DecodeModel(u)
			if err != nil {
				return nil, err
			}
			return planes.apply(m, certs)
		},
	}
	// Which model an edge serves, to compare edges with each other and
	// with the gateway's fleetnet_gateway_deploys_total.
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fleetnet_edge_model_version",
		Help: "Distribution version of the model served (0 before the first)."}, func() float64 {
		if u := client.Serving(); u != nil {
			return float64(u.GetVersion())
		}
		return 0
	}))
	if _, err := client.Restore(ctx); err != nil {
		// A kept model that no longer applies is not fatal: the gateway
		// sends the current one.
		log.Error("the last good model could not be served", "err", err)
	}

	servers := []*http.Server{
		{Addr: o.MetricsAddr, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 10 * time.Second},
		{Addr: o.HealthAddr, Handler: probes(client), ReadHeaderTimeout: 10 * time.Second},
	}
	errc := make(chan error, len(servers))
	for _, s := range servers {
		ln, err := net.Listen("tcp", s.Addr)
		if err != nil {
			return fmt.Errorf("listening on %s: %w", s.Addr, err)
		}
		go func() {
			if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	runErr := make(chan error, 1)
	go func() { runErr <- client.Run(ctx) }()
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	<-runErr
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(shutdown)
	}
	return errors.Join(err, planes.close(shutdown))
}

// dataPlanes serves each model with the HTTP proxy and the L4 proxy as
// one: both serve it, or neither changes and the model is refused (NACK),
// as the gateway expects of an edge. A listener or port the edge cannot
// bind is the exception: it is left out and reported alone, and the rest
// of the model is served.
type dataPlanes struct {
	http *proxy.Proxy
	l4   *l4.Proxy
	log  *slog.Logger
	// ranges are the endpoints the edge may dial; withheld counts those of
	// the model served that it does not.
	ranges   endpointranges.Ranges
	withheld atomic.Int64
	// eastWest is the east-west role; nil without it.
	eastWest *eastWest

	mu sync.Mutex
	// served is the model the HTTP proxy serves and its certificates, to
	// put back if the L4 proxy cannot complete a model.
	served      *edgev1.Model
	servedCerts map[string]*tls.Certificate
}

// apply checks m's load balancers (a TCP port of a Gateway listener is a
// conflict) and binds their new ports first, then serves m's Gateways,
// then the load balancers. A port handed from a Gateway listener to a
// load balancer is bound once the HTTP proxy let it go; should that bind
// fail, the HTTP proxy goes back to the model before. It returns the
// parts of m it serves m without: load balancer ports and Gateway
// listeners whose socket cannot be bound (in use by another process, or
// by the edge itself).
func (d *dataPlanes) apply(m *edgev1.Model, certs map[string]*tls.Certificate) ([]*edgev1.Refusal, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, certs = d.withHeld(m, certs)
	withheld := d.ranges.Filter(m)
	change, err := d.l4.Prepare(m, func(port int32) bool { return d.http.Addr(port) != nil })
	if err != nil {
		return nil, err
	}
	var refused []*edgev1.Refusal
	for _, r := range change.Refused() {
		ns, name, _ := strings.Cut(r.LoadBalancer, "/")
		refused = append(refused, &edgev1.Refusal{Kind: edgev1.RefusalKindLoadBalancer, Namespace: ns, Name: name,
			Port: r.Port, Protocol: r.Protocol, Reason: r.Err.Error()})
	}
	unbound, err := d.http.Apply(m, certs)
	if err != nil {
		change.Abort()
		return nil, err
	}
	served, unboundRefusals := withoutUnbound(m, unbound)
	refused = append(refused, unboundRefusals...)
	if err := change.Commit(); err != nil {
		if _, rerr := d.http.Apply(d.served, d.servedCerts); rerr != nil {
			d.log.Error("the Gateways' listeners of the model before could not be served again", "version", d.served.Version, "err", rerr)
		}
		change.Abort()
		return nil, err
	}
	d.served, d.servedCerts = served, certs
	d.eastWest.serve(m.EastWest)
	if n := int64(len(withheld)); n != d.withheld.Swap(n) && n > 0 {
		// Once per change of their number, not per model: a member's
		// endpoints stay outside until its export or the flag changes.
		d.log.Warn("endpoints outside --endpoint-ranges are not dialled", "version", m.Version, "count", n,
			"first", fmt.Sprintf("%s: %s in cluster %s", withheld[0].Object, withheld[0].Address, withheld[0].Cluster), "ranges", d.ranges.String())
	}
	return refused, nil
}

// withHeld returns m with each object it holds (Hold: refused, and the
// gateway no longer knows its last accepted configuration, having
// restarted without it) as the edge served it before, certificates
// included: the model's contract is that a provider then changes and
// withdraws nothing of it. An object the edge never served stays without
// listeners or ports until the gateway sends it.
func (d *dataPlanes) withHeld(m *edgev1.Model, certs map[string]*tls.Certificate) (*edgev1.Model, map[string]*tls.Certificate) {
	var out *edgev1.Model
	copyOnce := func() {
		if out == nil {
			c := *m
			c.Gateways, c.LoadBalancers = slices.Clone(m.Gateways), slices.Clone(m.LoadBalancers)
			out = &c
			merged := make(map[string]*tls.Certificate, len(certs))
			maps.Copy(merged, certs)
			certs = merged
		}
	}
	// What is kept was range-filtered when it was served; filtering it
	// again changes nothing, so it may share its slices with d.served.
	for i, gw := range m.Gateways {
		if !gw.Hold {
			continue
		}
		j := slices.IndexFunc(d.served.Gateways, func(s edgev1.Gateway) bool { return s.Namespace == gw.Namespace && s.Name == gw.Name })
		if j < 0 {
			continue
		}
		copyOnce()
		kept := d.served.Gateways[j]
		kept.Refused, kept.Hold = gw.Refused, true
		out.Gateways[i] = kept
		for _, l := range kept.Listeners {
			for _, c := range l.Certificates {
				if _, ok := certs[c.Digest]; !ok && d.servedCerts[c.Digest] != nil {
					certs[c.Digest] = d.servedCerts[c.Digest]
				}
			}
		}
	}
	for i, lb := range m.LoadBalancers {
		if !lb.Hold {
			continue
		}
		j := slices.IndexFunc(d.served.LoadBalancers, func(s edgev1.LoadBalancer) bool { return s.Namespace == lb.Namespace && s.Name == lb.Name })
		if j < 0 {
			continue
		}
		copyOnce()
		kept := d.served.LoadBalancers[j]
		kept.Refused, kept.Hold = lb.Refused, true
		out.LoadBalancers[i] = kept
	}
	if out == nil {
		return m, certs
	}
	return out, certs
}

// withoutUnbound returns m without the Gateway listeners on sockets the
// HTTP proxy could not bind, and those listeners as refusals: each is
// refused alone, and the model served without them is the one to go back
// to.
func withoutUnbound(m *edgev1.Model, unbound []proxy.Unbound) (*edgev1.Model, []*edgev1.Refusal) {
	if len(unbound) == 0 {
		return m, nil
	}
	type socket struct {
		host string
		port int32
	}
	failed := map[socket]error{}
	for _, u := range unbound {
		failed[socket{u.Host, u.Port}] = u.Err
	}
	out := *m
	out.Gateways = make([]edgev1.Gateway, len(m.Gateways))
	var refused []*edgev1.Refusal
	for i, gw := range m.Gateways {
		gw.Listeners = slices.DeleteFunc(slices.Clone(gw.Listeners), func(l edgev1.Listener) bool {
			err, bad := failed[socket{gw.Address, l.Port}]
			if bad {
				refused = append(refused, &edgev1.Refusal{Kind: edgev1.RefusalKindGateway, Namespace: gw.Namespace, Name: gw.Name,
					Listener: l.Name, Port: l.Port, Reason: err.Error()})
			}
			return bad
		})
		out.Gateways[i] = gw
	}
	return &out, refused
}

// close stops both data planes at once, letting what is in flight finish
// until ctx ends.
func (d *dataPlanes) close(ctx context.Context) error {
	l4Err := make(chan error, 1)
	go func() { l4Err <- d.l4.Close(ctx) }()
	return errors.Join(d.http.Close(ctx), <-l4Err)
}

func probes(c *subscribe.Client) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if u := c.Serving(); u != nil {
			fmt.Fprintf(w, "serving model version %d\n", u.GetVersion())
			return
		}
		http.Error(w, "no model yet: waiting for the gateway", http.StatusServiceUnavailable)
	})
	return mux
}

// reconnectBackoff paces attempts to reach fleetnet-gateway again.
var reconnectBackoff = backoff.Config{BaseDelay: 200 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second}

// GCPercent is the edge's garbage collection target unless GOGC is set.
// A proxy allocates per request and holds little: at Go's default of 100 the
// collector took about a quarter of the edge's CPU under load (profile in
// the issue 11 notes); collecting less often trades some memory for it.
const GCPercent = 400

// TuneGC applies GCPercent when the environment does not set GOGC.
func TuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(GCPercent)
	}
}
