package proxy

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
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
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration)
	}
	return m
}

// observe counts a request and writes its access log line.
func (p *Proxy) observe(r *http.Request, code int, pk *picked, start time.Time) {
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
	elapsed := time.Since(start)
	p.metrics.requests.WithLabelValues(route, backend, cluster, strconv.Itoa(code)).Inc()
	p.metrics.duration.WithLabelValues(route, cluster).Observe(elapsed.Seconds())
	if p.opts.AccessLog {
		p.log.Info("request", "method", r.Method, "host", r.Host, "path", r.URL.Path, "code", code,
			"route", route, "backend", backend, "cluster", cluster, "duration", elapsed)
	}
}
