package server

import (
	"context"
	"time"

	"github.com/fleetnet/fleetnet/internal/recovered"
	"github.com/fleetnet/fleetnet/internal/registry/view"
	"github.com/fleetnet/fleetnet/internal/skewcheck"
	"github.com/fleetnet/fleetnet/internal/tlsrefusal"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	watchers prometheus.Gauge
	// watchesRefused counts watches refused past a cap, by watchLimit.
	watchesRefused *prometheus.CounterVec
	storeOps       *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, r *Registry) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetnet_registry_requests_total", Help: "Registry calls by method and status code.",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fleetnet_registry_request_duration_seconds", Help: "Latency of unary registry calls.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"method"}),
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fleetnet_registry_watchers", Help: "Open watch streams."}),
		watchesRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetnet_registry_watchers_refused_total", Help: "Watch streams refused with ResourceExhausted, by the cap they would have passed: per_identity or total.",
		}, []string{"limit"}),
		storeOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetnet_registry_store_operations_total", Help: "Store operations by operation and result.",
		}, []string{"operation", "result"}),
	}
	for _, l := range []watchLimit{limitPerIdentity, limitTotal} {
		m.watchesRefused.WithLabelValues(string(l)) // at 0 from the start
	}
	// Gauges of the view are computed when scraped, not on every change.
	fromView := func(name, help string, fn func(v *view.View) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			r.mu.Lock()
			defer r.mu.Unlock()
			return fn(r.view)
		})
	}
	if reg != nil {
		if err := recovered.Register(reg); err != nil {
			panic(err) // as MustRegister below
		}
		if err := tlsrefusal.Register(reg); err != nil {
			panic(err)
		}
		if err := skewcheck.Register(reg); err != nil {
			panic(err)
		}
		reg.MustRegister(m.requests, m.latency, m.watchers, m.watchesRefused, m.storeOps,
			fromView("fleetnet_registry_live_clusters", "Clusters with a live lease.", func(v *view.View) float64 {
				live := 0
				for _, c := range v.Clusters() {
					if c.GetLive() {
						live++
					}
				}
				return float64(live)
			}),
			fromView("fleetnet_registry_imports", "Merged imports.", func(v *view.View) float64 { return float64(len(v.Imports())) }),
			fromView("fleetnet_registry_export_conflicts", "Exports with at least one conflict.", func(v *view.View) float64 {
				n := 0
				for _, s := range v.ExportStatuses("*") {
					if len(s.GetConflicts()) > 0 {
						n++
					}
				}
				return float64(n)
			}),
			fromView("fleetnet_registry_view_revision", "Store revision the registry's view reflects.", func(v *view.View) float64 { return float64(v.Revision()) }),
		)
	}
	return m
}

// UnaryInterceptor counts and times unary calls.
func (r *Registry) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	r.metrics.latency.WithLabelValues(info.FullMethod).Observe(time.Since(start).Seconds())
	r.metrics.requests.WithLabelValues(info.FullMethod, status.Code(err).String()).Inc()
	return resp, err
}

// StreamInterceptor counts streaming calls when they end.
func (r *Registry) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	err := handler(srv, ss)
	r.metrics.requests.WithLabelValues(info.FullMethod, status.Code(err).String()).Inc()
	return err
}
