package fleetnet

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/fleetnet/fleetnet/internal/dns/index"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func init() {
	plugin.Register(Name, setup)
	insertDirective()
}

// insertDirective puts fleetnet into CoreDNS's plugin order, which decides
// the chain whatever the Corefile's order: just before kubernetes, so after
// cache (whose hits then skip us), log, errors and prometheus, like the
// other plugins that answer from a backend.
func insertDirective() {
	if slices.Contains(dnsserver.Directives, Name) {
		return
	}
	i := slices.Index(dnsserver.Directives, "kubernetes")
	if i < 0 {
		i = len(dnsserver.Directives)
	}
	dnsserver.Directives = slices.Insert(dnsserver.Directives, i, Name)
}

// The plugin's metrics, registered with Prometheus' default registry, which
// CoreDNS's prometheus plugin serves.
var (
	importsGauge = promauto.NewGauge(prometheus.GaugeOpts{
		Namespace: plugin.Namespace, Subsystem: Name, Name: "imports",
		Help: "ServiceImports in the clusterset DNS index.",
	})
	slicesGauge = promauto.NewGauge(prometheus.GaugeOpts{
		Namespace: plugin.Namespace, Subsystem: Name, Name: "endpointslices",
		Help: "Imported EndpointSlices in the clusterset DNS index.",
	})
	syncedGauge = promauto.NewGauge(prometheus.GaugeOpts{
		Namespace: plugin.Namespace, Subsystem: Name, Name: "synced",
		Help: "1 once the ServiceImport and EndpointSlice caches have synced.",
	})
)

// config is a parsed fleetnet stanza.
type config struct {
	zones      []string
	ttl        uint32
	kubeconfig string
	context    string
}

func setup(c *caddy.Controller) error {
	cfg, err := parse(c)
	if err != nil {
		return plugin.Error(Name, err)
	}
	rc, err := restConfig(cfg.kubeconfig, cfg.context)
	if err != nil {
		return plugin.Error(Name, err)
	}
	log := slog.Default()
	ix := index.New(log, nil)
	ix.OnChange = func(imports, slices int) {
		importsGauge.Set(float64(imports))
		slicesGauge.Set(float64(slices))
	}
	h := &Handler{Zones: cfg.zones, TTL: cfg.ttl, Index: ix}
	kc, mc, err := Clients(rc)
	if err != nil {
		return plugin.Error(Name, err)
	}
	w, err := NewWatcher(kc, mc, ix, log)
	if err != nil {
		return plugin.Error(Name, err)
	}
	c.OnStartup(func() error {
		log.Info("watching serviceimports and imported endpointslices", "apiServer", rc.Host, "zones", cfg.zones, "ttl", cfg.ttl)
		w.Start(func() {
			syncedGauge.Set(1)
			h.SetSynced()
		})
		return nil
	})
	c.OnShutdown(func() error {
		w.Stop()
		return nil
	})
	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		h.Next = next
		return h
	})
	return nil
}

// parse reads the stanza; see the package documentation for its syntax.
func parse(c *caddy.Controller) (config, error) {
	cfg := config{ttl: DefaultTTL}
	seen := false
	for c.Next() {
		if seen {
			return cfg, plugin.ErrOnce
		}
		seen = true
		cfg.zones = plugin.OriginsFromArgsOrServerBlock(c.RemainingArgs(), c.ServerBlockKeys)
		for c.NextBlock() {
			switch c.Val() {
			case "kubeconfig":
				args := c.RemainingArgs()
				if len(args) < 1 || len(args) > 2 {
					return cfg, c.ArgErr()
				}
				cfg.kubeconfig = args[0]
				if len(args) == 2 {
					cfg.context = args[1]
				}
			case "ttl":
				args := c.RemainingArgs()
				if len(args) != 1 {
					return cfg, c.ArgErr()
				}
				ttl, err := strconv.ParseUint(args[0], 10, 32)
				if err != nil || ttl > 3600 {
					return cfg, c.Errf("ttl %q: must be a number of seconds from 0 to 3600", args[0])
				}
				cfg.ttl = uint32(ttl)
			default:
				return cfg, c.Errf("unknown property %q", c.Val())
			}
		}
	}
	if len(cfg.zones) == 0 {
		return cfg, c.Err("no zone to answer")
	}
	return cfg, nil
}

// restConfig loads the kubeconfig at path (its context, when given), or
// when path is empty the in-cluster configuration, then $KUBECONFIG and
// ~/.kube/config, as kubectl does.
func restConfig(path, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		if path == "" {
			return nil, fmt.Errorf("loading the in-cluster or default kubeconfig: %w", err)
		}
		return nil, fmt.Errorf("loading kubeconfig %s: %w", path, err)
	}
	cfg.UserAgent = "fleetnet-dns"
	return cfg, nil
}
