package proxy

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fleetnet/fleetnet/internal/edge/accesslog"
	"github.com/fleetnet/fleetnet/internal/edge/health"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	retries  *prometheus.CounterVec
	handoffs *prometheus.CounterVec
	// forwarded counts requests by the path that forwarded them.
	forwardedVec                        *prometheus.CounterVec
	viaFast, viaStream, viaReverseProxy prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, served func() *table) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetnet_edge_requests_total",
			Help: "Requests served, by route (namespace/name/rule), backend, cluster and status code.",
		}, []string{"route", "backend", "cluster", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fleetnet_edge_request_duration_seconds",
			Help:    "Time from a request's arrival to its response's end, by route and cluster.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "cluster"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetnet_edge_retries_total",
			Help: "Attempts sent again by the backend's retry policy, by route and backend.",
		}, []string{"route", "backend"}),
		handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetnet_edge_http_handoffs_total",
			Help: "Client connections the HTTP/1.1 fast path handed to the HTTP/2 server or net/http, by reason (h2, version, upgrade, expect, target, head-size, route).",
		}, []string{"reason"}),
		forwardedVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetnet_edge_forwarded_requests_total",
			Help: "Requests forwarded to an endpoint, by the edge's forwarder: fast-path (HTTP/1.1), http2-stream (HTTP/2 over the fast path's upstream pools), reverse-proxy (net/http).",
		}, []string{"forwarder"}),
	}
	m.viaFast = m.forwardedVec.WithLabelValues("fast-path")
	m.viaStream = m.forwardedVec.WithLabelValues("http2-stream")
	m.viaReverseProxy = m.forwardedVec.WithLabelValues("reverse-proxy")
	if reg != nil {
		reg.MustRegister(m.requests, m.duration, m.retries, m.handoffs, m.forwardedVec, endpointsCollector{served: served})
	}
	return m
}

// endpointsDesc is a gauge computed when scraped, from the table served
// then, so that health changes cost the request path nothing.
var endpointsDesc = prometheus.NewDesc("fleetnet_edge_backend_endpoints",
	"Ready endpoints of a backend in a cluster, by the backend's health check: healthy, or ejected (by the active or the passive check).",
	[]string{"backend", "cluster", "health"}, nil)

type endpointsCollector struct{ served func() *table }

func (endpointsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- endpointsDesc }

func (c endpointsCollector) Collect(ch chan<- prometheus.Metric) {
	type group struct{ backend, cluster string }
	type counts struct{ healthy, ejected int }
	// A backend named by several routes is counted once per checked unit.
	seen := map[group]map[*health.Target]bool{}
	byGroup := map[group]*counts{}
	for b := range c.served().backends() {
		for _, cl := range b.clusters {
			g := group{b.name, cl.Cluster}
			if seen[g] == nil {
				seen[g], byGroup[g] = map[*health.Target]bool{}, &counts{}
			}
			for i := range cl.ready {
				tg := cl.ready[i].health
				if tg == nil || seen[g][tg] {
					continue
				}
				seen[g][tg] = true
				if tg.Healthy() {
					byGroup[g].healthy++
				} else {
					byGroup[g].ejected++
				}
			}
		}
	}
	for g, n := range byGroup {
		ch <- prometheus.MustNewConstMetric(endpointsDesc, prometheus.GaugeValue, float64(n.healthy), g.backend, g.cluster, "healthy")
		ch <- prometheus.MustNewConstMetric(endpointsDesc, prometheus.GaugeValue, float64(n.ejected), g.backend, g.cluster, "ejected")
	}
}

// series are a cluster's metric children, resolved at its first request
// (the 200 counter at its first 200, so that no series shows before its
// first count).
type series struct {
	duration prometheus.Observer
	ok       atomic.Pointer[prometheus.Counter]
}

// observe counts a request and writes its access log line.
func (p *Proxy) observe(method, host, path string, code int, pk *picked, start time.Time) {
	route, backend, cluster := "", "", ""
	if pk.route != nil {
		route = pk.route.name
	}
	if pk.backend != nil {
		backend = pk.backend.name
	}
	if pk.cluster != nil {
		cluster = pk.cluster.Cluster
	}
	now := time.Now()
	elapsed := now.Sub(start)
	if c := pk.cluster; c != nil {
		// The common case: children held by the cluster (one per route
		// and backend), looked up by their labels once.
		s := c.series.Load()
		if s == nil {
			s = &series{duration: p.metrics.duration.WithLabelValues(route, cluster)}
			c.series.Store(s)
		}
		if code == http.StatusOK {
			ok := s.ok.Load()
			if ok == nil {
				counter := p.metrics.requests.WithLabelValues(route, backend, cluster, "200")
				ok = &counter
				s.ok.Store(ok)
			}
			(*ok).Inc()
		} else {
			p.metrics.requests.WithLabelValues(route, backend, cluster, strconv.Itoa(code)).Inc()
		}
		s.duration.Observe(elapsed.Seconds())
	} else {
		p.metrics.requests.WithLabelValues(route, backend, cluster, strconv.Itoa(code)).Inc()
		p.metrics.duration.WithLabelValues(route, cluster).Observe(elapsed.Seconds())
	}
	if p.opts.AccessLog != nil {
		p.opts.AccessLog.Log(&accesslog.Entry{Time: now, Method: method, Host: host, Path: path, Code: code,
			Route: route, Backend: backend, Cluster: cluster, Duration: elapsed})
	}
}
