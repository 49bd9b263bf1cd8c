// Package edgefeed reads the fleetnet-edges' Prometheus metrics at an
// interval and gives fleetnet-console the live traffic split: requests per
// second by route rule and cluster (and those answered 5xx), new L4 connections per second by load
// balancer and cluster, and each backend's healthy and ejected endpoints
// per cluster, summed over the edges. A rate is the counters' increase
// between two reads over the time between them; an edge that restarted
// (its counter went down) counts from zero.
package edgefeed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/fleetnet/fleetnet/internal/console/model"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	prommodel "github.com/prometheus/common/model"
)

// Config configures a Feed.
type Config struct {
	// URLs are the edges' metrics endpoints (http(s)://HOST:PORT/metrics).
	URLs  []string
	Model *model.Model
	Log   *slog.Logger
	// Every is how often the edges are read; zero is 2s.
	Every time.Duration
	// Client reads them; nil is a client with a timeout of Every.
	Client *http.Client
}

// Feed reads the edges.
type Feed struct {
	cfg  Config
	prev map[string]sample
}

// sample is one edge's counters at one read.
type sample struct {
	at       time.Time
	counters map[string]float64
}

// New returns a feed; Run reads the edges.
func New(cfg Config) *Feed {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Every <= 0 {
		cfg.Every = 2 * time.Second
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: cfg.Every}
	}
	return &Feed{cfg: cfg, prev: map[string]sample{}}
}

// Run reads the edges until ctx ends.
func (f *Feed) Run(ctx context.Context) error {
	t := time.NewTicker(f.cfg.Every)
	defer t.Stop()
	failing := map[string]bool{}
	for {
		traffic := newTraffic(time.Now())
		var errs []error
		for _, u := range f.cfg.URLs {
			err := f.readEdge(ctx, u, &traffic)
			switch {
			case ctx.Err() != nil:
				return nil
			case err != nil && !failing[u]:
				f.cfg.Log.Info("reading an edge's metrics failed; its traffic is left out until it answers", "url", u, "err", err)
			case err == nil && failing[u]:
				f.cfg.Log.Info("reading an edge's metrics works again", "url", u)
			}
			failing[u] = err != nil
			if err != nil {
				errs = append(errs, err)
			}
		}
		state := model.Feed{Synced: len(errs) < len(f.cfg.URLs)}
		if err := errors.Join(errs...); err != nil {
			state.Error = err.Error()
		}
		f.cfg.Model.SetFeed(model.FeedEdge, state)
		f.cfg.Model.SetTraffic(traffic)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func newTraffic(at time.Time) model.Traffic {
	return model.Traffic{At: at, Routes: map[string]map[string]float64{}, RouteErrors: map[string]map[string]float64{}, Backends: map[string]map[string]model.EndpointHealth{},
		LoadBalancers: map[string]map[string]float64{}, LoadBalancerHealth: map[string]map[string]model.EndpointHealth{}}
}

// readEdge reads one edge and adds it to t.
func (f *Feed) readEdge(ctx context.Context, url string, t *model.Traffic) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	resp, err := f.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	families, err := Parse(resp.Body)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	now := time.Now()
	cur := sample{at: now, counters: Counters(families)}
	prev, ok := f.prev[url]
	f.prev[url] = cur
	AddHealth(families, t)
	if ok {
		AddRates(prev.counters, cur.counters, now.Sub(prev.at), t)
	}
	return nil
}

// Parse reads a metrics page in Prometheus's text format.
func Parse(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(prommodel.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	return families, nil
}

// The metrics read, and the series key's parts.
const (
	requests    = "fleetnet_edge_requests_total"
	connections = "fleetnet_edge_l4_connections_total"
	endpoints   = "fleetnet_edge_backend_endpoints"
	l4Endpoints = "fleetnet_edge_l4_endpoints"
	// serverErrors keys the requests answered 5xx among Counters'.
	serverErrors = "5xx"
)

// Counters picks the counters the split needs, keyed "METRIC\x00KEY\x00CLUSTER"
// where KEY is the route rule or the load balancer.
func Counters(families map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, f := range []struct{ name, key string }{{requests, "route"}, {connections, "load_balancer"}} {
		for _, m := range families[f.name].GetMetric() {
			l := labels(m)
			if l["cluster"] == "" {
				continue
			}
			k := l[f.key] + "\x00" + l["cluster"]
			out[f.name+"\x00"+k] += m.GetCounter().GetValue()
			if f.name == requests && strings.HasPrefix(l["code"], "5") {
				out[serverErrors+"\x00"+k] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// AddRates adds the increase from prev to cur over dt to t.
func AddRates(prev, cur map[string]float64, dt time.Duration, t *model.Traffic) {
	if dt <= 0 {
		return
	}
	for k, v := range cur {
		d := v - prev[k]
		if d < 0 {
			d = v // the edge restarted
		}
		name, rest, _ := strings.Cut(k, "\x00")
		key, cluster, _ := strings.Cut(rest, "\x00")
		dst := t.Routes
		switch name {
		case connections:
			dst = t.LoadBalancers
		case serverErrors:
			dst = t.RouteErrors
		}
		if dst[key] == nil {
			dst[key] = map[string]float64{}
		}
		dst[key][cluster] += d / dt.Seconds()
	}
}

// AddHealth adds the backends' and load balancers' endpoint health to t
// (a load balancer's ports summed).
func AddHealth(families map[string]*dto.MetricFamily, t *model.Traffic) {
	for _, f := range []struct {
		name, key string
		dst       map[string]map[string]model.EndpointHealth
	}{{endpoints, "backend", t.Backends}, {l4Endpoints, "load_balancer", t.LoadBalancerHealth}} {
		for _, m := range families[f.name].GetMetric() {
			l := labels(m)
			k, c := l[f.key], l["cluster"]
			if f.dst[k] == nil {
				f.dst[k] = map[string]model.EndpointHealth{}
			}
			h := f.dst[k][c]
			n := int(m.GetGauge().GetValue())
			switch l["health"] {
			case "healthy":
				h.Healthy += n
			case "ejected":
				h.Ejected += n
			}
			f.dst[k][c] = h
		}
	}
}

func labels(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}
