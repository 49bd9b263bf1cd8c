package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/internal/discovery/kubesource"
	"github.com/fleetnet/fleetnet/internal/discovery/memory"
	"github.com/fleetnet/fleetnet/internal/discovery/registrysource"
	"github.com/fleetnet/fleetnet/internal/discovery/server"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
	registryclient "github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
)

// Source is a pool source (--pool-source): it puts pools into the store,
// level-based (store.Replace, store.Delete, store.ReplaceSource under a
// source name of its own), and answers what the server asks of it. A
// source that also implements server.Registrar takes registrations; the
// others answer them 501.
//
// To add one: write it in its own package under
// internal/discovery, add its constructor to sources below and its flags
// to Options (validated in Validate, naming the flag).
type Source interface {
	// Routers, Synced and Status: see server.Backend. Synced must be
	// closed only once the store holds the source's whole state (the
	// informers' caches synced and written, the registry's snapshot
	// applied): watches wait for it before their first snapshot.
	server.Backend
	// Run feeds the store until ctx ends. An error ends the process;
	// transient failures are the source's to retry (keeping what it put
	// into the store: fail static).
	Run(ctx context.Context) error
}

// SourceEnv is what a source is built from.
type SourceEnv struct {
	Options *Options
	Store   *store.Store
	Log     *slog.Logger
	// Registerer takes the source's metrics (named fleetnet_discovery_*).
	Registerer prometheus.Registerer
	// Routers is --routers, parsed.
	Routers []discoveryv1.Router
}

// sources maps --pool-source values to constructors.
var sources = map[string]func(SourceEnv) (Source, error){
	"memory": func(env SourceEnv) (Source, error) {
		return memory.New(memory.Config{
			Store: env.Store, TTL: env.Options.LeaseTTL, Grace: env.Options.RegistrationGrace,
			Routers: env.Routers, MaxPerOwner: env.Options.MaxRegistrations, Registerer: env.Registerer,
		}), nil
	},
	"registry": func(env SourceEnv) (Source, error) {
		rc, conn, err := registryclient.Dial(env.Options.Registry)
		if err != nil {
			return nil, fmt.Errorf("--registry=%s: %w", env.Options.Registry.Address, err)
		}
		src := registrysource.New(registrysource.Config{Client: rc, Store: env.Store, Routers: env.Routers, Log: env.Log, Registerer: env.Registerer})
		return closingSource{src, conn.Close}, nil
	},
	"kubernetes": func(env SourceEnv) (Source, error) {
		o := env.Options
		cfg, err := kubesource.RESTConfig(o.Kubeconfig, o.Context)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig=%q --context=%q: %w", o.Kubeconfig, o.Context, err)
		}
		kc, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("creating the Kubernetes client: %w", err)
		}
		var routers store.Key
		if o.RoutersService != "" {
			routers, _ = parseService(o.RoutersService)
		}
		var mc mcsclient.Interface
		if o.PoolLabels == "serviceimports" {
			// ServiceImports are a CRD, served as JSON only.
			jcfg := rest.CopyConfig(cfg)
			jcfg.ContentType, jcfg.AcceptContentTypes = "application/json", "application/json"
			if mc, err = mcsclient.NewForConfig(jcfg); err != nil {
				return nil, fmt.Errorf("creating the multicluster.x-k8s.io client: %w", err)
			}
		}
		return kubesource.New(kubesource.Config{
			Client: kc, MCSClient: mc, Store: env.Store, Selection: kubesource.Selection(o.SliceSelection),
			RoutersService: routers, Cluster: o.ClusterName, Log: env.Log, Registerer: env.Registerer,
		})
	},
}

// closingSource closes what the source holds (a connection) once Run
// returns.
type closingSource struct {
	Source
	close func() error
}

func (c closingSource) Run(ctx context.Context) error {
	defer c.close()
	return c.Source.Run(ctx)
}

var (
	_ Source           = (*registrysource.Source)(nil)
	_ Source           = (*kubesource.Source)(nil)
	_ Source           = (*memory.Memory)(nil)
	_ server.Registrar = (*memory.Memory)(nil)
	// The kubernetes source serves one cluster's imports, which carry no
	// export's scope: callers that are clusters are refused.
	_ server.ScopeBlind = (*kubesource.Source)(nil)
)

// ParseRouters parses --routers entries:
// INSTANCE=ADDRESS:PORT[?cluster=C&region=R&zone=Z&port-name=N&protocol=P].
func ParseRouters(entries []string) ([]discoveryv1.Router, error) {
	var out []discoveryv1.Router
	seen := map[string]bool{}
	for _, entry := range entries {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("--routers=%q: %s", entry, fmt.Sprintf(format, args...))
		}
		spec, rawQuery, _ := strings.Cut(entry, "?")
		id, hostport, ok := strings.Cut(spec, "=")
		if !ok || id == "" {
			return nil, bad("want INSTANCE=ADDRESS:PORT[?cluster=C&region=R&zone=Z&port-name=N&protocol=P]")
		}
		host, portStr, err := net.SplitHostPort(hostport)
		if err != nil {
			return nil, bad("%v", err)
		}
		if _, err := netip.ParseAddr(host); err != nil {
			return nil, bad("%q is not an IP address", host)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil || port < 1 || port > 65535 {
			return nil, bad("port %q is not from 1 to 65535", portStr)
		}
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			return nil, bad("%v", err)
		}
		r := discoveryv1.Router{InstanceID: id, Addresses: []string{host}, Ready: true,
			Cluster: q.Get("cluster"), Region: q.Get("region"), Zone: q.Get("zone")}
		p := discoveryv1.Port{Name: "http", Port: int32(port), Protocol: "TCP"}
		for k := range q {
			switch k {
			case "cluster", "region", "zone":
			case "port-name":
				p.Name = q.Get(k)
			case "protocol":
				p.Protocol = q.Get(k)
			default:
				return nil, bad("unknown key %q; known: cluster, region, zone, port-name, protocol", k)
			}
		}
		for _, c := range []struct{ key, value string }{{"region", r.Region}, {"zone", r.Zone}} {
			if msgs := validation.IsValidLabelValue(c.value); len(msgs) > 0 {
				return nil, bad("%s %q: %s", c.key, c.value, msgs[0])
			}
		}
		if msgs := validation.IsDNS1123Label(p.Name); len(msgs) > 0 {
			return nil, bad("port-name %q: %s", p.Name, msgs[0])
		}
		if p.Protocol != "TCP" && p.Protocol != "UDP" && p.Protocol != "SCTP" {
			return nil, bad("protocol %q: must be TCP, UDP or SCTP", p.Protocol)
		}
		if seen[r.Cluster+"/"+id] {
			return nil, bad("instance %q is given twice", id)
		}
		seen[r.Cluster+"/"+id] = true
		r.Ports = []discoveryv1.Port{p}
		out = append(out, r)
	}
	return out, nil
}
