package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/fleetnet/fleetnet/internal/discovery/store"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	watchers prometheus.Gauge
	cutOffs  prometheus.Counter
	delivery prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, st *store.Store) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetnet_discovery_requests_total", Help: "API requests by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fleetnet_discovery_request_duration_seconds", Help: "Latency of API requests other than watches.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"route"}),
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fleetnet_discovery_watchers", Help: "Open watch streams."}),
		cutOffs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fleetnet_discovery_watchers_cut_off_total", Help: "Watch streams ended because the client fell behind.",
		}),
		delivery: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fleetnet_discovery_watch_delivery_seconds", Help: "Time from a change in the store to its event written to a watcher's connection.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16),
		}),
	}
	if reg == nil {
		return m
	}
	// Store gauges are computed when scraped, not on every change.
	fromStore := func(name, help string, fn func(store.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return fn(st.Stats()) })
	}
	reg.MustRegister(m.requests, m.latency, m.watchers, m.cutOffs, m.delivery,
		fromStore("fleetnet_discovery_revision", "The store's revision.", func(s store.Stats) float64 { return float64(s.Revision) }),
		fromStore("fleetnet_discovery_pools", "Pools served.", func(s store.Stats) float64 { return float64(s.Pools) }),
		fromStore("fleetnet_discovery_endpoints", "Endpoints of every pool.", func(s store.Stats) float64 { return float64(s.Endpoints) }),
	)
	return m
}

func (m *metrics) observeDelivery(changed []time.Time) {
	now := time.Now()
	for _, t := range changed {
		m.delivery.Observe(now.Sub(t).Seconds())
	}
}

// instrument counts and times requests by the route pattern that served
// them (so that pool names do not become label values).
func (m *metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rw, r)
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		m.requests.WithLabelValues(route, strconv.Itoa(rw.status)).Inc()
		if route != "GET /v1/watch" {
			m.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
		}
	})
}

// statusWriter records the status code; Unwrap lets
// http.ResponseController reach the connection's Flush and deadlines.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
