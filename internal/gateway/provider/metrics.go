package provider

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are fleetnet-gateway's provider metrics, by load balancer class
// (edge, azure-cross-region, azure-front-door): what Queue does, how
// long Split's objects have been waiting to be served, and what the Azure
// providers see of Azure Resource Manager (ObserveARM,
// SetPrivateLinkConnections).
type Metrics struct {
	reg         prometheus.Registerer
	collectors  []prometheus.Collector
	deploys     *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	lastSuccess *prometheus.GaugeVec
	waiting     *prometheus.GaugeVec
	// The Azure providers' ARM requests and Private Link connections
	// (ObserveARM, SetPrivateLinkConnections).
	armErrors    *prometheus.CounterVec
	armThrottled *prometheus.CounterVec
	retryAfter   *prometheus.HistogramVec
	links        *prometheus.GaugeVec
}

// Private Link connection states, the state label of
// fleetnet_gateway_azure_private_link_connections: Azure's connection
// statuses in lower case.
var PrivateLinkStates = []string{"pending", "approved", "rejected", "disconnected"}

// Results of a deploy, the label of fleetnet_gateway_deploys_total.
const (
	ResultSuccess    = "success"
	ResultFailure    = "failure"
	ResultSuperseded = "superseded"
)

// NewMetrics registers the provider metrics on reg (none with nil) and
// the pending-object gauges Split computes when scraped.
func NewMetrics(reg prometheus.Registerer, s *Split) *Metrics {
	m := &Metrics{
		deploys: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetnet_gateway_deploys_total",
			Help: "Models handed to a provider, by class and result (success, failure, superseded: a newer model arrived first)."}, []string{"class", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fleetnet_gateway_deploy_duration_seconds",
			Help: "How long a provider's deploy took, by class.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 12)}, []string{"class"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fleetnet_gateway_last_deploy_success_timestamp_seconds",
			Help: "Unix time of a provider's last deploy without error, by class."}, []string{"class"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fleetnet_gateway_queue_depth",
			Help: "Models a provider has not deployed yet (deploying, or waiting for a retry), by class: 0 or 1, as a newer model replaces a waiting one."}, []string{"class"}),
		armErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetnet_gateway_azure_arm_errors_total",
			Help: "Tries of Azure Resource Manager requests that failed, by class, operation (the SDK method) and code: the HTTP status (400 and above), or timeout for a try unanswered within the per-try timeout."}, []string{"class", "operation", "code"}),
		armThrottled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetnet_gateway_azure_arm_throttled_total",
			Help: "Tries of Azure Resource Manager requests answered 429 (throttled), by class and operation."}, []string{"class", "operation"}),
		retryAfter: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fleetnet_gateway_azure_arm_retry_after_seconds",
			Help:    "The Retry-After of Azure Resource Manager's 429 answers (0 when none was sent), by class.",
			Buckets: []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300}}, []string{"class"}),
		links: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fleetnet_gateway_azure_private_link_connections",
			Help: "Private Link connections of the provider's origins to the member clusters' Private Link Services, by class and state (pending, approved, rejected, disconnected), as last observed."}, []string{"class", "state"}),
	}
	if reg != nil {
		m.reg, m.collectors = reg, []prometheus.Collector{m.deploys, m.duration, m.lastSuccess, m.waiting, m.armErrors, m.armThrottled, m.retryAfter, m.links}
		if s != nil {
			m.collectors = append(m.collectors, pendingCollector{s})
		}
		reg.MustRegister(m.collectors...)
	}
	return m
}

// Unregister takes the metrics off the registry NewMetrics put them on,
// for a process that runs the gateway again (tests).
func (m *Metrics) Unregister() {
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
}

// observe records one deploy of class.
func (m *Metrics) observe(class, result string, took time.Duration) {
	if m == nil {
		return
	}
	m.deploys.WithLabelValues(class, result).Inc()
	if result != ResultSuperseded {
		m.duration.WithLabelValues(class).Observe(took.Seconds())
	}
	if result == ResultSuccess {
		m.lastSuccess.WithLabelValues(class).SetToCurrentTime()
	}
}

func (m *Metrics) setWaiting(class string, waiting bool) {
	if m == nil {
		return
	}
	v := 0.0
	if waiting {
		v = 1
	}
	m.waiting.WithLabelValues(class).Set(v)
}

// ObserveARM records one try of an Azure Resource Manager request of
// class: operation is the SDK method, status the HTTP status (0 for none),
// unanswered a try whose timeout passed, retryAfter a 429's Retry-After.
func (m *Metrics) ObserveARM(class, operation string, status int, unanswered bool, retryAfter time.Duration) {
	if m == nil {
		return
	}
	switch {
	case unanswered:
		m.armErrors.WithLabelValues(class, operation, "timeout").Inc()
	case status >= 400:
		m.armErrors.WithLabelValues(class, operation, strconv.Itoa(status)).Inc()
	}
	if status == http.StatusTooManyRequests {
		m.armThrottled.WithLabelValues(class, operation).Inc()
		m.retryAfter.WithLabelValues(class).Observe(retryAfter.Seconds())
	}
}

// SetPrivateLinkConnections sets class's Private Link connections by
// state (Azure's status, any case); the states of PrivateLinkStates it
// lacks are set to 0, and others are counted as they come.
func (m *Metrics) SetPrivateLinkConnections(class string, byState map[string]int) {
	if m == nil {
		return
	}
	n := map[string]int{}
	for _, s := range PrivateLinkStates {
		n[s] = 0
	}
	for s, c := range byState {
		n[strings.ToLower(s)] += c
	}
	for s, c := range n {
		m.links.WithLabelValues(class, s).Set(float64(c))
	}
}

var (
	pendingDesc = prometheus.NewDesc("fleetnet_gateway_objects_pending",
		"Gateways and load balancers a provider does not serve as the newest model says yet, by class.", []string{"class"}, nil)
	oldestDesc = prometheus.NewDesc("fleetnet_gateway_objects_pending_oldest_seconds",
		"How long the longest-waiting of those has been waiting, by class (0 when none).", []string{"class"}, nil)
)

// pendingCollector reads Split's pending objects when scraped.
type pendingCollector struct{ s *Split }

func (c pendingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pendingDesc
	ch <- oldestDesc
}

func (c pendingCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for class, since := range c.s.pending(now) {
		oldest := 0.0
		for _, t := range since {
			oldest = max(oldest, now.Sub(t).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(len(since)), class)
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, oldest, class)
	}
}

// pendingSince remembers since when each object has been pending.
type pendingSince struct {
	mu    sync.Mutex
	since map[string]map[string]time.Time // class -> object -> first seen pending
}

// update sets class's pending objects (keys) as seen at now, keeping the
// time each was first seen, and returns a copy.
func (p *pendingSince) update(class string, keys []string, now time.Time) map[string]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.since == nil {
		p.since = map[string]map[string]time.Time{}
	}
	old, cur := p.since[class], map[string]time.Time{}
	for _, k := range keys {
		if t, ok := old[k]; ok {
			cur[k] = t
		} else {
			cur[k] = now
		}
	}
	p.since[class] = cur
	out := make(map[string]time.Time, len(cur))
	for k, t := range cur {
		out[k] = t
	}
	return out
}
