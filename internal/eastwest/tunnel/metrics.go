package tunnel

import "github.com/prometheus/client_golang/prometheus"

// Metrics count a gateway's streams. A nil *Metrics counts nothing.
type Metrics struct {
	streams  *prometheus.CounterVec
	active   *prometheus.GaugeVec
	refusals *prometheus.CounterVec
	byteVec  *prometheus.CounterVec
	// dialErrors count a dialer's failed connections to peer gateways.
	dialErrors *prometheus.CounterVec
}

// NewMetrics registers the tunnel's metrics on reg. Their labels are
// verified clusters and authorized services only: what a refused caller
// sends never becomes a label value.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		streams: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetnet_eastwest_streams_total",
			Help: "Streams carried to a local endpoint, by calling cluster and service."}, []string{"peer", "service"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fleetnet_eastwest_streams_active",
			Help: "Streams being carried, by calling cluster."}, []string{"peer"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetnet_eastwest_streams_refused_total",
			Help: "Streams refused, by reason."}, []string{"reason"}),
		byteVec: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetnet_eastwest_stream_bytes_total",
			Help: "Bytes carried, by calling cluster, service and direction (in: from the caller)."}, []string{"peer", "service", "direction"}),
		dialErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetnet_eastwest_tunnel_dial_errors_total",
			Help: "Connections to other clusters' gateways that failed, by cluster and reason (connect, or the TLS handshake's: unknown_authority, name_mismatch, expired, ...)."}, []string{"peer", "reason"}),
	}
	reg.MustRegister(m.streams, m.active, m.refusals, m.byteVec, m.dialErrors)
	return m
}

func (m *Metrics) dialFailed(peer, reason string) {
	if m != nil {
		m.dialErrors.WithLabelValues(peer, reason).Inc()
	}
}

// connectionsDesc describes a dialer's pooled connections (Dialer is a
// prometheus.Collector).
var connectionsDesc = prometheus.NewDesc("fleetnet_eastwest_tunnel_connections",
	"Connections to other clusters' gateways this gateway holds, by cluster.", []string{"peer"}, nil)

func (m *Metrics) refused(reason string) {
	if m != nil {
		m.refusals.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) started(peer, service string) (done func()) {
	if m == nil {
		return func() {}
	}
	m.streams.WithLabelValues(peer, service).Inc()
	g := m.active.WithLabelValues(peer)
	g.Inc()
	return g.Dec
}

// byteCounters count a stream's bytes; nil counts nothing.
type byteCounters struct{ in, out prometheus.Counter }

func (b *byteCounters) addIn(n int) {
	if b != nil {
		b.in.Add(float64(n))
	}
}

func (b *byteCounters) addOut(n int) {
	if b != nil {
		b.out.Add(float64(n))
	}
}

func (m *Metrics) bytes(peer, service string) *byteCounters {
	if m == nil {
		return nil
	}
	return &byteCounters{in: m.byteVec.WithLabelValues(peer, service, "in"), out: m.byteVec.WithLabelValues(peer, service, "out")}
}
