package model

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// EntryPointsView is the entry points page: the hub's Gateways, routes,
// load balancers and policies, each backend with its split over the
// clusters, configured and live.
type EntryPointsView struct {
	Revision      uint64             `json:"revision"`
	Feeds         map[string]Feed    `json:"feeds"`
	Gateways      []Gateway          `json:"gateways"`
	Routes        []RouteView        `json:"routes"`
	LoadBalancers []LoadBalancerView `json:"loadBalancers"`
	Policies      []Policy           `json:"policies"`
	// TrafficAt is when the edges were last read (zero: never).
	TrafficAt time.Time `json:"trafficAt,omitzero"`
}

// RouteView is a route with its rules' backends split over the clusters.
type RouteView struct {
	Route
	RuleSplits []RuleSplit `json:"ruleSplits"`
}

// RuleSplit is one rule: its live requests by cluster, and each backend's
// clusters.
type RuleSplit struct {
	Rule int `json:"rule"`
	// RequestsPerSecond is the rule's rate at the edges, all clusters.
	RequestsPerSecond float64        `json:"requestsPerSecond"`
	Backends          []BackendSplit `json:"backends"`
}

// BackendSplit is one backend of a rule.
type BackendSplit struct {
	BackendRef
	// Clusters are those in the ServiceImport, sorted by id.
	Clusters []ClusterSplit `json:"clusters"`
}

// ClusterSplit is one cluster's part of a backend.
type ClusterSplit struct {
	Cluster string `json:"cluster"`
	Region  string `json:"region,omitempty"`
	Weight  uint32 `json:"weight"`
	Ready   int    `json:"ready"`
	// State is Healthy, Draining or Missing (load balancers' status), or
	// for routes Healthy, or Missing when no endpoint is ready.
	State string `json:"state"`
	// Share is the part of new requests or connections the edge gives it
	// (weight × ready endpoints over the sum), 0 to 1.
	Share float64 `json:"share"`
	// Live is its part of what the edges sent over the last interval
	// (-1: no traffic to tell), and Rate that traffic per second.
	Live float64 `json:"live"`
	Rate float64 `json:"rate"`
	// Errors is the part of Rate answered 5xx (routes only).
	Errors float64 `json:"errors"`
	// Healthy and Ejected are its endpoints as the edges' health checks
	// see them (-1: the edges report none).
	Healthy int `json:"healthy"`
	Ejected int `json:"ejected"`
}

// LoadBalancerView is a load balancer with its split.
type LoadBalancerView struct {
	LoadBalancer
	ConnectionsPerSecond float64        `json:"connectionsPerSecond"`
	Split                []ClusterSplit `json:"split"`
}

// EntryPoints returns the entry points page.
func (m *Model) EntryPoints() EntryPointsView {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v := EntryPointsView{
		Revision: m.rev, Feeds: map[string]Feed{FeedRegistry: m.registry, FeedHub: m.hub, FeedEdge: m.edge},
		Gateways: nonNil(m.hubs.Gateways), Policies: nonNil(m.hubs.Policies),
		Routes: []RouteView{}, LoadBalancers: []LoadBalancerView{}, TrafficAt: m.traffic.At,
	}
	for _, r := range m.hubs.Routes {
		rv := RouteView{Route: r, RuleSplits: []RuleSplit{}}
		for i, rule := range r.Rules {
			key := fmt.Sprintf("%s/%s/%d", r.Namespace, r.Name, i)
			rates := m.traffic.Routes[key]
			rs := RuleSplit{Rule: i, RequestsPerSecond: sum(rates), Backends: []BackendSplit{}}
			for _, b := range rule.Backends {
				split := m.routeSplit(b, rates)
				for j := range split {
					split[j].Errors = m.traffic.RouteErrors[key][split[j].Cluster]
				}
				rs.Backends = append(rs.Backends, BackendSplit{BackendRef: b, Clusters: split})
			}
			rv.RuleSplits = append(rv.RuleSplits, rs)
		}
		v.Routes = append(v.Routes, rv)
	}
	for _, lb := range m.hubs.LoadBalancers {
		rates := m.traffic.LoadBalancers[lb.Namespace+"/"+lb.Name]
		health := m.traffic.LoadBalancerHealth[lb.Namespace+"/"+lb.Name]
		lv := LoadBalancerView{LoadBalancer: lb, ConnectionsPerSecond: sum(rates), Split: []ClusterSplit{}}
		var total float64
		for _, c := range lb.Clusters {
			s := ClusterSplit{Cluster: c.Name, Region: m.clusters[c.Name].GetRegion(), Weight: uint32(max(c.Weight, 0)),
				Ready: int(c.ReadyEndpoints), State: c.State, Healthy: -1, Ejected: -1}
			if h, ok := health[c.Name]; ok {
				s.Healthy, s.Ejected = h.Healthy, h.Ejected
			}
			if c.State == stateHealthy {
				s.Share = float64(c.Weight) * float64(c.ReadyEndpoints)
				total += s.Share
			}
			lv.Split = append(lv.Split, s)
		}
		finish(lv.Split, total, rates)
		v.LoadBalancers = append(v.LoadBalancers, lv)
	}
	return v
}

const (
	stateHealthy = "Healthy"
	stateMissing = "Missing"
)

// routeSplit is a route backend's clusters; m.mu is held.
func (m *Model) routeSplit(b BackendRef, rates map[string]float64) []ClusterSplit {
	out := []ClusterSplit{}
	if b.Kind != "ServiceImport" {
		return out
	}
	s := Service{Namespace: b.Namespace, Name: b.Name}
	imp := m.imports[s]
	health := m.traffic.Backends["ServiceImport/"+s.String()]
	var total float64
	for _, c := range imp.GetClusters() {
		id := c.GetClusterId()
		cs := ClusterSplit{Cluster: id, Region: c.GetRegion(), Weight: c.GetWeight(), Ready: m.readyOf[exportKey{s, id}].ready, State: stateHealthy, Healthy: -1, Ejected: -1}
		if cs.Ready == 0 {
			cs.State = stateMissing
		}
		if h, ok := health[id]; ok {
			cs.Healthy, cs.Ejected = h.Healthy, h.Ejected
		}
		cs.Share = float64(cs.Weight) * float64(cs.Ready)
		total += cs.Share
		out = append(out, cs)
	}
	slices.SortFunc(out, func(a, b ClusterSplit) int { return strings.Compare(a.Cluster, b.Cluster) })
	finish(out, total, rates)
	return out
}

// finish turns the splits' effective weights into shares, and adds the
// live traffic.
func finish(splits []ClusterSplit, total float64, rates map[string]float64) {
	all := sum(rates)
	for i := range splits {
		if total > 0 {
			splits[i].Share /= total
		} else {
			splits[i].Share = 0
		}
		splits[i].Rate = rates[splits[i].Cluster]
		splits[i].Live = -1
		if all > 0 {
			splits[i].Live = splits[i].Rate / all
		}
	}
}

func sum(m map[string]float64) float64 {
	var t float64
	for _, v := range m {
		t += v
	}
	return t
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
