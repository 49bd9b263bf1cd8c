package l4

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the load balancers' series, by load balancer
// (namespace/name), port ("5432/TCP") and cluster ("" for connections and
// datagrams that no endpoint took).
type metrics struct {
	conns        *prometheus.CounterVec
	active       *prometheus.GaugeVec
	bytes        *prometheus.CounterVec
	dialFailures *prometheus.CounterVec
	flows        *prometheus.GaugeVec
	evicted      *prometheus.CounterVec
	datagrams    *prometheus.CounterVec
	refused      *prometheus.CounterVec
}

// clusterMetrics are the series of one cluster of one port, resolved
// when a table is compiled so that the data path does no label lookup.
type clusterMetrics struct {
	conns, dialFailures prometheus.Counter
	active, flows       prometheus.Gauge
	// in is from clients to endpoints, out back.
	bytesIn, bytesOut prometheus.Counter
	dgramIn, dgramOut prometheus.Counter
	evicted           prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, served func() *table, now func() int64) *metrics {
	labels := []string{"load_balancer", "port", "cluster"}
	m := &metrics{
		conns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetnet_edge_l4_connections_total",
			Help: "TCP connections accepted, by the cluster they were forwarded to (\"\": no endpoint took them, closed at once).",
		}, labels),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleetnet_edge_l4_connections_active",
			Help: "TCP connections open, by the cluster they were forwarded to.",
		}, labels),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetnet_edge_l4_bytes_total",
			Help: "Bytes forwarded, TCP and UDP: direction in is from clients to endpoints, out back.",
		}, append(labels, "direction")),
		dialFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetnet_edge_l4_connect_failures_total",
			Help: "Failed connections to endpoints (TCP), and UDP datagrams an endpoint refused (ICMP port unreachable).",
		}, labels),
		flows: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleetnet_edge_l4_udp_flows_active",
			Help: "UDP flows (client address and port) held, by the cluster of their endpoint.",
		}, labels),
		evicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetnet_edge_l4_udp_flows_evicted_total",
			Help: "UDP flows removed before their idle time because the port held its maximum of flows.",
		}, []string{"load_balancer", "port"}),
		datagrams: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetnet_edge_l4_datagrams_total",
			Help: "UDP datagrams forwarded (cluster \"\": dropped, no endpoint), direction in from clients, out back.",
		}, append(labels, "direction")),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetnet_edge_l4_connections_refused_total",
			Help: "TCP connections reset when accepted, not forwarded: the port held its maximum of connections (reason port_limit) or the client's address its own (client_limit).",
		}, []string{"load_balancer", "port", "reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.conns, m.active, m.bytes, m.dialFailures, m.flows, m.evicted, m.datagrams, m.refused, endpointsCollector{served: served, now: now})
	}
	return m
}

func (m *metrics) cluster(lb, port, cluster string) *clusterMetrics {
	return &clusterMetrics{
		conns:        m.conns.WithLabelValues(lb, port, cluster),
		active:       m.active.WithLabelValues(lb, port, cluster),
		bytesIn:      m.bytes.WithLabelValues(lb, port, cluster, "in"),
		bytesOut:     m.bytes.WithLabelValues(lb, port, cluster, "out"),
		dialFailures: m.dialFailures.WithLabelValues(lb, port, cluster),
		flows:        m.flows.WithLabelValues(lb, port, cluster),
		evicted:      m.evicted.WithLabelValues(lb, port),
		dgramIn:      m.datagrams.WithLabelValues(lb, port, cluster, "in"),
		dgramOut:     m.datagrams.WithLabelValues(lb, port, cluster, "out"),
	}
}

// endpointsDesc is a gauge computed when scraped, from the table served
// then, so that health changes cost the data path nothing.
var endpointsDesc = prometheus.NewDesc("fleetnet_edge_l4_endpoints",
	"Ready endpoints of a load balancer's port in a cluster: healthy, or ejected (by the active check or a failed connection).",
	[]string{"load_balancer", "port", "cluster", "health"}, nil)

type endpointsCollector struct {
	served func() *table
	now    func() int64
}

func (endpointsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- endpointsDesc }

func (c endpointsCollector) Collect(ch chan<- prometheus.Metric) {
	t, now := c.served(), c.now()
	for _, s := range t.services {
		port := s.key.String()
		for _, cl := range s.clusters {
			healthy, ejected := 0, 0
			for i := range cl.ready {
				if cl.ready[i].healthy(now) {
					healthy++
				} else {
					ejected++
				}
			}
			ch <- prometheus.MustNewConstMetric(endpointsDesc, prometheus.GaugeValue, float64(healthy), s.lb, port, cl.name, "healthy")
			ch <- prometheus.MustNewConstMetric(endpointsDesc, prometheus.GaugeValue, float64(ejected), s.lb, port, cl.name, "ejected")
		}
	}
}
