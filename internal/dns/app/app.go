// Package app assembles the fleetnet-dns process: CoreDNS's server with its
// errors, log, health, ready, prometheus and cache plugins and fleetnet's
// own plugin (internal/dns/fleetnet), configured from flags or from a
// Corefile.
//
// # Forwarding the zone from a cluster's CoreDNS
//
// fleetnet-dns runs as its own Deployment behind a Service; the cluster's
// own CoreDNS forwards the clusterset zone to that Service's ClusterIP
// (forward takes addresses, not names: give the Service a fixed
// spec.clusterIP, 10.96.0.53 here) with a server block beside the
// cluster.local one in its Corefile (kube-system/coredns ConfigMap):
//
//	clusterset.local:53 {
//	    errors
//	    cache 5
//	    forward . 10.96.0.53:53
//	}
//
// Pods then resolve <svc>.<ns>.svc.clusterset.local through the resolver
// they already use. The cache's 5 seconds should not exceed fleetnet-dns'
// --ttl: a withdrawn import would otherwise be answered for longer. In the
// Deployment, give --lameduck=5s (as CoreDNS's own Deployment does), probe
// /health for liveness and /ready for readiness, and bind the role that
// this package's RBAC markers describe (list and watch of serviceimports
// and endpointslices).
//
// # One per cluster on one machine
//
// Every address is a flag and the kubeconfig (with --context) names the
// cluster, so a local fleet runs one fleetnet-dns per cluster on loopback:
//
//	fleetnet-dns --kubeconfig .fleetnet/dev/east/kubeconfig --listen 127.0.0.1:17453 \
//	  --metrics-addr 127.0.0.1:17454 --health-addr 127.0.0.1:17455 --ready-addr 127.0.0.1:17456
//
// CoreDNS keeps some state per process (its ready plugin's list of plugins,
// among others), so one process runs one fleetnet-dns.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	// The plugins a Corefile of fleetnet-dns may use; importing them
	// registers them with CoreDNS. Only these are linked in: the whole
	// CoreDNS plugin set would bring every cloud SDK along.
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	"github.com/fleetnet/fleetnet/internal/dns/fleetnet"
)

// Options are fleetnet-dns' flags.
type Options struct {
	// Listen is the DNS address (UDP and TCP), host:port; an empty host
	// means every interface.
	Listen string
	// Zone is the clusterset zone answered.
	Zone string
	// TTL of every record, whole seconds.
	TTL time.Duration
	// Kubeconfig and Context select the cluster; empty Kubeconfig means the
	// in-cluster configuration.
	Kubeconfig string
	Context    string
	// MetricsAddr, HealthAddr and ReadyAddr serve /metrics, /health and
	// /ready.
	MetricsAddr string
	HealthAddr  string
	ReadyAddr   string
	// Lameduck is how long the server keeps answering after it is told to
	// stop (the health plugin's lameduck).
	Lameduck time.Duration
	// LogQueries logs every query (CoreDNS's log plugin).
	LogQueries bool
	// Corefile, when set, is the path of a Corefile run instead of the one
	// the flags above describe.
	Corefile string

	// changed reports whether a flag was given, so that Validate can refuse
	// flags that --corefile would silently override. Nil outside the
	// command (every option then counts as given only when not default).
	changed func(name string) bool
}

// Defaults of the flags.
const (
	DefaultListen      = ":1053"
	DefaultZone        = keys.ClustersetZone
	DefaultMetricsAddr = ":9153"
	DefaultHealthAddr  = ":8080"
	DefaultReadyAddr   = ":8181"
)

// BindFlags registers the options on fs.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", DefaultListen, "DNS address (UDP and TCP) host:port; an empty host is every interface. The default port needs no privilege: a Service maps port 53 to it")
	fs.StringVar(&o.Zone, "zone", DefaultZone, "the clusterset zone to answer")
	fs.DurationVar(&o.TTL, "ttl", fleetnet.DefaultTTL*time.Second, "TTL of every record and of negative answers, whole seconds from 0s to 1h; short, so that a withdrawn import is forgotten quickly")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster whose ServiceImports are answered; empty means in-cluster, then $KUBECONFIG")
	fs.StringVar(&o.Context, "context", "", "kubeconfig context; empty means its current context")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", DefaultMetricsAddr, "address of /metrics (Prometheus)")
	fs.StringVar(&o.HealthAddr, "health-addr", DefaultHealthAddr, "address of /health (liveness)")
	fs.StringVar(&o.ReadyAddr, "ready-addr", DefaultReadyAddr, "address of /ready (readiness: 200 once the ServiceImport and EndpointSlice caches have synced)")
	fs.DurationVar(&o.Lameduck, "lameduck", 0, "how long to keep answering after SIGTERM, so that the Pod leaves its Service's endpoints before it stops answering (5s in a Deployment, as CoreDNS's own); 0s stops at once")
	fs.BoolVar(&o.LogQueries, "log-queries", false, "log every query and its answer to standard output")
	fs.StringVar(&o.Corefile, "corefile", "", "run this Corefile instead of the one the other flags describe (it may use bind, errors, log, health, ready, prometheus, cache and fleetnet)")
	o.changed = func(name string) bool { return fs.Changed(name) }
}

// corefileFlags are the flags that a Corefile replaces.
var corefileFlags = []string{"listen", "zone", "ttl", "kubeconfig", "context", "metrics-addr", "health-addr", "ready-addr", "lameduck", "log-queries"}

// Validate checks the options before anything starts; every error names its
// flag and value.
func (o *Options) Validate() error {
	var errs []error
	if o.Corefile != "" {
		for _, name := range corefileFlags {
			if o.changed != nil && o.changed(name) {
				errs = append(errs, fmt.Errorf("--corefile and --%s: the Corefile replaces --%s, give one", name, name))
			}
		}
		if _, err := os.Stat(o.Corefile); err != nil {
			errs = append(errs, fmt.Errorf("--corefile=%q: %w", o.Corefile, err))
		}
		return errors.Join(errs...)
	}
	if err := validateAddr("--listen", o.Listen, true); err != nil {
		errs = append(errs, err)
	}
	zone := strings.TrimSuffix(o.Zone, ".")
	for _, msg := range validation.IsDNS1123Subdomain(zone) {
		errs = append(errs, fmt.Errorf("--zone=%q: %s", o.Zone, msg))
	}
	if o.TTL < 0 || o.TTL > time.Hour || o.TTL%time.Second != 0 {
		errs = append(errs, fmt.Errorf("--ttl=%s: must be whole seconds from 0s to 1h", o.TTL))
	}
	if o.Lameduck < 0 || o.Lameduck > time.Minute {
		errs = append(errs, fmt.Errorf("--lameduck=%s: must be from 0s to 1m", o.Lameduck))
	}
	if strings.ContainsAny(o.Kubeconfig, "\"\n") {
		errs = append(errs, fmt.Errorf("--kubeconfig=%q: must not hold a double quote or a newline", o.Kubeconfig))
	}
	if strings.ContainsAny(o.Context, "\" \t\n{}") {
		errs = append(errs, fmt.Errorf("--context=%q: must not hold quotes, blanks or braces", o.Context))
	}
	seen := map[string]string{}
	for _, f := range []struct{ name, value string }{{"--metrics-addr", o.MetricsAddr}, {"--health-addr", o.HealthAddr}, {"--ready-addr", o.ReadyAddr}} {
		if err := validateAddr(f.name, f.value, false); err != nil {
			errs = append(errs, err)
			continue
		}
		if other, ok := seen[f.value]; ok {
			errs = append(errs, fmt.Errorf("%s=%q: %s has the same address", f.name, f.value, other))
		}
		seen[f.value] = f.name
	}
	return errors.Join(errs...)
}

// validateAddr checks host:port with a port from 1 to 65535 and, for the
// DNS listener, a host that is empty or an IP (CoreDNS's bind takes
// addresses).
func validateAddr(flag, addr string, ipHost bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", flag, addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%s=%q: port must be a number from 1 to 65535", flag, addr)
	}
	if ipHost && host != "" && net.ParseIP(host) == nil {
		return fmt.Errorf("%s=%q: host must be an IP address or empty", flag, addr)
	}
	return nil
}

// BuildCorefile returns the Corefile that the flags describe: one server
// block for the zone on --listen, with errors, the optional log, health,
// ready, prometheus, cache (capped at the TTL, so that the cache never
// serves an answer longer than fleetnet-dns would) and fleetnet.
func (o *Options) BuildCorefile() string {
	host, port, _ := net.SplitHostPort(o.Listen)
	zone := strings.ToLower(strings.TrimSuffix(o.Zone, "."))
	ttl := int(o.TTL / time.Second)
	var b strings.Builder
	fmt.Fprintf(&b, "%s.:%s {\n", zone, port)
	if host != "" {
		fmt.Fprintf(&b, "    bind %s\n", host)
	}
	b.WriteString("    errors\n")
	if o.LogQueries {
		b.WriteString("    log\n")
	}
	if o.Lameduck > 0 {
		fmt.Fprintf(&b, "    health %s {\n        lameduck %s\n    }\n", o.HealthAddr, o.Lameduck)
	} else {
		fmt.Fprintf(&b, "    health %s\n", o.HealthAddr)
	}
	fmt.Fprintf(&b, "    ready %s\n", o.ReadyAddr)
	fmt.Fprintf(&b, "    prometheus %s\n", o.MetricsAddr)
	if ttl > 0 {
		// The cache refuses a zero TTL; with --ttl=0s nothing is cached.
		fmt.Fprintf(&b, "    cache %d\n", ttl)
	}
	b.WriteString("    fleetnet {\n")
	if o.Kubeconfig != "" {
		fmt.Fprintf(&b, "        kubeconfig %q", o.Kubeconfig)
		if o.Context != "" {
			fmt.Fprintf(&b, " %s", o.Context)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "        ttl %d\n", ttl)
	b.WriteString("    }\n}\n")
	return b.String()
}

// Server is a running fleetnet-dns.
type Server struct {
	inst *caddy.Instance
	log  *slog.Logger
}

// Start validates the options and starts serving; the listeners are bound
// when it returns. The fleetnet plugin logs through slog.Default().
func Start(o Options, log *slog.Logger) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	corefile, path := o.BuildCorefile(), "flags"
	if o.Corefile != "" {
		b, err := os.ReadFile(o.Corefile)
		if err != nil {
			return nil, fmt.Errorf("--corefile: %w", err)
		}
		corefile, path = string(b), o.Corefile
	}
	// CoreDNS prints its banner and server list to standard output unless
	// quiet; the log line below says the same as JSON.
	dnsserver.Quiet = true
	inst, err := caddy.Start(caddy.CaddyfileInput{Contents: []byte(corefile), Filepath: path, ServerTypeName: "dns"})
	if err != nil {
		return nil, fmt.Errorf("starting CoreDNS with the Corefile from %s: %w", path, err)
	}
	if o.Corefile != "" {
		log.Info("fleetnet-dns serving", "corefile", path)
	} else {
		log.Info("fleetnet-dns serving", "listen", o.Listen, "zone", o.Zone, "ttl", o.TTL.String(), "kubeconfig", o.Kubeconfig)
	}
	return &Server{inst: inst, log: log}, nil
}

// Stop runs the plugins' shutdown (the informers stop, then the health
// plugin's lameduck passes while the listeners still answer from the
// index as it was) and closes the listeners.
func (s *Server) Stop() error {
	errs := s.inst.ShutdownCallbacks()
	if err := s.inst.Stop(); err != nil {
		errs = append(errs, err)
	}
	s.inst.Wait()
	return errors.Join(errs...)
}

// Run serves until ctx ends.
func Run(ctx context.Context, o Options, log *slog.Logger) error {
	s, err := Start(o, log)
	if err != nil {
		return err
	}
	<-ctx.Done()
	s.log.Info("fleetnet-dns stopping")
	if err := s.Stop(); err != nil {
		return fmt.Errorf("stopping: %w", err)
	}
	return nil
}
