package model

import (
	"reflect"
	"time"
)

// Hub is what the hub's API holds about the global entry points, as the
// hub feed read it from its caches.
type Hub struct {
	Gateways      []Gateway      `json:"gateways"`
	Routes        []Route        `json:"routes"`
	LoadBalancers []LoadBalancer `json:"loadBalancers"`
	Policies      []Policy       `json:"policies"`
}

// Condition is a status condition as the UI shows it.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	// Parent names the Gateway a route's condition is about.
	Parent string `json:"parent,omitempty"`
}

// Gateway is a Gateway of the hub.
type Gateway struct {
	Namespace  string      `json:"namespace"`
	Name       string      `json:"name"`
	Class      string      `json:"class"`
	Addresses  []string    `json:"addresses"`
	Listeners  []Listener  `json:"listeners"`
	Conditions []Condition `json:"conditions"`
}

// Listener is one listener of a Gateway.
type Listener struct {
	Name           string `json:"name"`
	Protocol       string `json:"protocol"`
	Port           int32  `json:"port"`
	Hostname       string `json:"hostname,omitempty"`
	AttachedRoutes int32  `json:"attachedRoutes"`
}

// Route is an HTTPRoute of the hub.
type Route struct {
	Namespace  string      `json:"namespace"`
	Name       string      `json:"name"`
	Hostnames  []string    `json:"hostnames,omitempty"`
	Parents    []string    `json:"parents"`
	Rules      []RouteRule `json:"rules"`
	Conditions []Condition `json:"conditions"`
}

// RouteRule is one rule of a route, with its backends.
type RouteRule struct {
	Backends []BackendRef `json:"backends"`
}

// BackendRef is a route's backend: a ServiceImport (or another kind,
// shown but not followed).
type BackendRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Port      int32  `json:"port,omitempty"`
	Weight    int32  `json:"weight"`
}

// LoadBalancer is a MultiClusterLoadBalancer of the hub.
type LoadBalancer struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Backend is the ServiceImport's NAMESPACE/NAME.
	Backend    string           `json:"backend"`
	Addresses  []string         `json:"addresses,omitempty"`
	Ports      string           `json:"ports,omitempty"`
	Clusters   []BackendCluster `json:"clusters"`
	Conditions []Condition      `json:"conditions"`
}

// BackendCluster is a cluster behind a load balancer as its status says.
type BackendCluster struct {
	Name           string `json:"name"`
	State          string `json:"state"`
	Weight         int32  `json:"weight"`
	ReadyEndpoints int32  `json:"readyEndpoints"`
}

// Policy is a BackendTrafficPolicy of the hub.
type Policy struct {
	Namespace  string      `json:"namespace"`
	Name       string      `json:"name"`
	Targets    []string    `json:"targets"`
	Locality   string      `json:"locality,omitempty"`
	Failover   []string    `json:"failover,omitempty"`
	Conditions []Condition `json:"conditions"`
}

// SetHub replaces the hub's objects.
func (m *Model) SetHub(h Hub) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if reflect.DeepEqual(m.hubs, h) {
		return
	}
	m.hubs = h
	m.changed()
}

// Traffic is what the edges' metrics say, as rates over the last scrape
// interval, summed over the edges.
type Traffic struct {
	// Routes are requests per second by route rule ("NAMESPACE/NAME/RULE",
	// the edge's route label) and cluster.
	Routes map[string]map[string]float64 `json:"routes"`
	// RouteErrors are those of Routes answered with a 5xx.
	RouteErrors map[string]map[string]float64 `json:"routeErrors"`
	// Backends are endpoints by backend ("ServiceImport/NAMESPACE/NAME")
	// and cluster.
	Backends map[string]map[string]EndpointHealth `json:"backends"`
	// LoadBalancers are new connections per second by load balancer
	// ("NAMESPACE/NAME") and cluster.
	LoadBalancers map[string]map[string]float64 `json:"loadBalancers"`
	// LoadBalancerHealth are a load balancer's endpoints by cluster, its
	// ports summed.
	LoadBalancerHealth map[string]map[string]EndpointHealth `json:"loadBalancerHealth"`
	// At is when the edges were read.
	At time.Time `json:"at"`
}

// EndpointHealth counts a backend's endpoints in a cluster as the edges
// see them (summed over the edges).
type EndpointHealth struct {
	Healthy int `json:"healthy"`
	Ejected int `json:"ejected"`
}

// SetTraffic replaces the edges' traffic.
func (m *Model) SetTraffic(t Traffic) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev := m.traffic
	m.traffic = t
	// A quiet fleet's rates stay 0: only a change wakes the pages.
	prev.At = t.At
	if !reflect.DeepEqual(prev, t) {
		m.changed()
	}
}
