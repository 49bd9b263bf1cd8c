package provider

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
)

// ClassEdge is the load balancer class the embedded edge serves.
const ClassEdge = "edge"

// Split hands each provider the part of the model it serves: the edge
// gets the Gateways and the load balancers of class edge, each cloud
// provider the load balancers of its class. Each provider deploys from a
// Queue of its own, so that a cloud's long-running operations never hold
// the edge back, and each reports its own progress. Split is what the
// controller sets models on and reads progress from.
type Split struct {
	Edge Provider
	// Clouds are the providers of other load balancer classes, by class.
	Clouds map[string]Provider
	// GatewayClasses routes the Gateways of a GatewayClass (by name) to
	// a cloud provider (by its class in Clouds) instead of the edge.
	GatewayClasses map[string]string
	Log            *slog.Logger
	// OnChange is called after any provider's deploy attempt.
	OnChange func()
	// Metrics, when set, count each class's deploys (NewMetrics).
	Metrics *Metrics

	once    sync.Once
	queues  map[string]*Queue
	waiting pendingSince
}

func (s *Split) init() {
	s.once.Do(func() {
		s.queues = map[string]*Queue{ClassEdge: {Provider: s.Edge, Log: s.Log, OnChange: s.OnChange, Class: ClassEdge, Metrics: s.Metrics}}
		for class, p := range s.Clouds {
			s.queues[class] = &Queue{Provider: p, Log: s.Log.With("class", class), OnChange: s.OnChange, Class: class, Metrics: s.Metrics}
		}
	})
}

// Classes are the load balancer classes served: edge, then the clouds'
// sorted.
func (s *Split) Classes() []string {
	return append([]string{ClassEdge}, slices.Sorted(maps.Keys(s.Clouds))...)
}

// Run runs every provider's queue until ctx ends.
func (s *Split) Run(ctx context.Context) {
	s.init()
	var wg sync.WaitGroup
	for _, q := range s.queues {
		wg.Go(func() { q.Run(ctx) })
	}
	wg.Wait()
}

// Set hands each provider's queue its part of m; it never waits.
func (s *Split) Set(m *edgev1.Model) {
	s.init()
	for class, q := range s.queues {
		part := *m
		part.LoadBalancers = nil
		part.Gateways = nil
		for _, gw := range m.Gateways {
			if cloud, ok := s.GatewayClasses[gw.Class]; ok && s.Clouds[cloud] != nil {
				if cloud == class {
					part.Gateways = append(part.Gateways, gw)
				}
			} else if class == ClassEdge {
				part.Gateways = append(part.Gateways, gw)
			}
		}
		for _, lb := range m.LoadBalancers {
			if lb.Class == class || (lb.Class == "" && class == ClassEdge) {
				part.LoadBalancers = append(part.LoadBalancers, lb)
			}
		}
		q.Set(&part)
	}
}

// Progress is the edge's, with every cloud provider's load balancers and
// class versions.
func (s *Split) Progress() Progress {
	p := s.Edge.Progress()
	p.LoadBalancers, p.ClassVersions, p.Gateways = map[string]LoadBalancerProgress{}, map[string]string{}, map[string]LoadBalancerProgress{}
	for class, c := range s.Clouds {
		cp := c.Progress()
		maps.Copy(p.LoadBalancers, cp.LoadBalancers)
		maps.Copy(p.Gateways, cp.Gateways)
		p.RouteRefusals = append(p.RouteRefusals, cp.RouteRefusals...)
		p.ClassVersions[class] = cp.ClassVersions[class]
	}
	return p
}

// ClassError is the last deploy error of the provider of a load balancer
// class (ClassEdge for the edge), nil after a success or for a class
// Split does not serve. Each object's status reads its own provider's.
func (s *Split) ClassError(class string) error {
	s.init()
	if q := s.queues[class]; q != nil {
		return q.LastError()
	}
	return nil
}

// pending is, per class, the objects its provider does not serve as the
// newest model says yet, with since when each has been seen so: a cloud
// provider's per object; for the edge, which serves the model whole, the
// edge's Gateways and load balancers while the edges have not
// acknowledged it.
func (s *Split) pending(now time.Time) map[string]map[string]time.Time {
	s.init()
	out := map[string]map[string]time.Time{}
	ep := s.Edge.Progress()
	var edgeKeys []string
	if m := s.queues[ClassEdge].wanted(); m != nil && !(ep.Served && ep.Version == m.Version) {
		for _, g := range m.Gateways {
			edgeKeys = append(edgeKeys, "Gateway "+g.Namespace+"/"+g.Name)
		}
		for _, lb := range m.LoadBalancers {
			edgeKeys = append(edgeKeys, "MultiClusterLoadBalancer "+lb.Namespace+"/"+lb.Name)
		}
	}
	out[ClassEdge] = s.waiting.update(ClassEdge, edgeKeys, now)
	for class, c := range s.Clouds {
		cp := c.Progress()
		var keys []string
		for k, g := range cp.Gateways {
			if !g.Served {
				keys = append(keys, "Gateway "+k)
			}
		}
		for k, lb := range cp.LoadBalancers {
			if !lb.Served {
				keys = append(keys, "MultiClusterLoadBalancer "+k)
			}
		}
		out[class] = s.waiting.update(class, keys, now)
	}
	return out
}
