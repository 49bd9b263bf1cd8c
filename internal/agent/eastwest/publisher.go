package eastwest

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/distribute"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Gateway is this cluster's east-west gateway, as the importer uses it.
type Gateway struct {
	// Service is the gateway's Service: the importer points the slices of
	// imports that go through it at this Service's ready endpoints.
	Service   types.NamespacedName
	Ports     *Allocator
	Publisher *Publisher
}

// Publisher keeps the gateway's model: the routes the importer applied
// and this cluster's exports (read from the cache with the registry's
// status of each), published to the gateway over the edge model stream
// after every change and every ResyncEvery.
type Publisher struct {
	Server *distribute.Server
	// Reader reads ServiceExports, Services and EndpointSlices (the cache).
	Reader client.Reader
	// Status returns the registry's status of one of this cluster's
	// exports, and whether the registry's stream is synced.
	Status func(namespace, name string) (*registryv1.ExportStatus, bool)
	// Resolve resolves gateways published by name.
	Resolve     Resolver
	Log         *slog.Logger
	ResyncEvery time.Duration

	mu     sync.Mutex
	routes map[types.NamespacedName]Route
	kick   chan struct{}
	once   sync.Once
}

func (p *Publisher) init() {
	p.once.Do(func() {
		p.kick = make(chan struct{}, 1)
		if p.routes == nil {
			p.routes = map[types.NamespacedName]Route{}
		}
	})
}

// SetRoute records an import that goes through the gateway.
func (p *Publisher) SetRoute(r Route) {
	p.init()
	p.mu.Lock()
	p.routes[r.Key] = r
	p.mu.Unlock()
	p.Kick()
}

// DeleteRoute forgets an import that no longer goes through the gateway.
func (p *Publisher) DeleteRoute(key types.NamespacedName) {
	p.init()
	p.mu.Lock()
	_, had := p.routes[key]
	delete(p.routes, key)
	p.mu.Unlock()
	if had {
		p.Kick()
	}
}

// Routed returns the imports that go through the gateway.
func (p *Publisher) Routed() []types.NamespacedName {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Collect(maps.Keys(p.routes))
}

// Kick asks for the model to be built and published again (coalesced).
func (p *Publisher) Kick() {
	p.init()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// NeedLeaderElection: the leader's importer applies the routes.
func (p *Publisher) NeedLeaderElection() bool { return true }

// Start publishes until ctx ends.
func (p *Publisher) Start(ctx context.Context) error {
	p.init()
	every := p.ResyncEvery
	if every <= 0 {
		every = 30 * time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := p.publish(ctx); err != nil {
			p.Log.Info("east-west model not published; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.kick:
			// Changes come in bursts (an import's reconcile, a scaled
			// Deployment's endpoints): one model for the burst.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(50 * time.Millisecond):
			}
		case <-tick.C:
		}
	}
}

// Model builds the gateway's model from the routes and the cache; problems
// are clusters left out of routes (see Model).
func (p *Publisher) Model(ctx context.Context) (*edgev1.Model, []string, error) {
	p.init()
	exports, err := p.exports(ctx)
	if err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	routes := slices.Collect(maps.Values(p.routes))
	p.mu.Unlock()
	m, problems := Model(routes, exports, p.Resolve)
	return m, problems, nil
}

func (p *Publisher) publish(ctx context.Context) error {
	m, problems, err := p.Model(ctx)
	if err != nil {
		return err
	}
	for _, pr := range problems {
		p.Log.Info("east-west route without a cluster", "problem", pr)
	}
	doc, certs, err := edgev1.EncodeModel(m)
	if err != nil {
		return err
	}
	p.Server.Publish(edgev1.ModelContentType, doc, certs)
	return nil
}

// exports are this cluster's exports that the registry holds, with their
// ready endpoints by TCP service port. An export without a registry status
// (not yet written, or the registry's stream not synced since a restart)
// is left out: nobody's scope is known for it, and a gateway refuses what
// it does not list.
func (p *Publisher) exports(ctx context.Context) ([]Export, error) {
	list := &mcsv1beta1.ServiceExportList{}
	if err := p.Reader.List(ctx, list); err != nil {
		return nil, err
	}
	var out []Export
	for _, se := range list.Items {
		st, _ := p.Status(se.Namespace, se.Name)
		if st == nil || !se.DeletionTimestamp.IsZero() {
			continue
		}
		svc := &corev1.Service{}
		if err := p.Reader.Get(ctx, types.NamespacedName{Namespace: se.Namespace, Name: se.Name}, svc); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue
			}
			return nil, err
		}
		slicesList := &discoveryv1.EndpointSliceList{}
		if err := p.Reader.List(ctx, slicesList, client.InNamespace(se.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: se.Name}); err != nil {
			return nil, err
		}
		out = append(out, Export{Namespace: se.Namespace, Name: se.Name, Status: st, Ports: ServicePortEndpoints(svc, slicesList.Items)})
	}
	return out, nil
}

// ServicePortEndpoints are a Service's ready, not terminating endpoints of
// each TCP port (its slices' port of the same name), IP addresses only.
func ServicePortEndpoints(svc *corev1.Service, slices []discoveryv1.EndpointSlice) map[int32][]edgev1.Endpoint {
	out := map[int32][]edgev1.Endpoint{}
	for _, sp := range svc.Spec.Ports {
		if sp.Protocol != "" && sp.Protocol != corev1.ProtocolTCP {
			continue
		}
		eps := []edgev1.Endpoint{}
		for _, s := range slices {
			if s.AddressType == discoveryv1.AddressTypeFQDN {
				continue
			}
			var port int32
			for _, p := range s.Ports {
				if ptr.Deref(p.Name, "") == sp.Name && ptr.Deref(p.Protocol, corev1.ProtocolTCP) == corev1.ProtocolTCP && p.Port != nil {
					port = *p.Port
				}
			}
			if port == 0 {
				continue
			}
			for _, e := range s.Endpoints {
				ready := ptr.Deref(e.Conditions.Ready, true) && !ptr.Deref(e.Conditions.Terminating, false)
				for _, a := range e.Addresses {
					eps = append(eps, edgev1.Endpoint{Address: a, Port: port, Ready: ready, Serving: ptr.Deref(e.Conditions.Serving, ready)})
				}
			}
		}
		out[sp.Port] = eps
	}
	return out
}

// GatewayChunks are what an import that goes through the gateway serves
// here, as endpoint chunks by name (one per address family): the
// gateway's endpoints (its Service's slices, conditions kept), each on
// the gateway ports of the import's carried service ports, named as the
// import names them so that the derived Service's ports select them.
func GatewayChunks(imp *registryv1.Import, ports map[int32]int32, gateway []discoveryv1.EndpointSlice) map[string]*registryv1.EndpointChunk {
	var eps []*registryv1.EndpointPort
	for _, p := range imp.GetPorts() {
		gp, ok := ports[p.GetPort()]
		if !ok || gp == 0 {
			continue
		}
		eps = append(eps, &registryv1.EndpointPort{Name: p.GetName(), Protocol: string(corev1.ProtocolTCP), Port: gp, AppProtocol: p.GetAppProtocol()})
	}
	out := map[string]*registryv1.EndpointChunk{}
	for _, s := range gateway {
		if s.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		name := "eastwest-gateway-" + string(s.AddressType)
		c := out[name]
		if c == nil {
			c = &registryv1.EndpointChunk{AddressType: string(s.AddressType), Ports: eps}
			out[name] = c
		}
		for _, e := range s.Endpoints {
			c.Endpoints = append(c.Endpoints, &registryv1.Endpoint{Addresses: e.Addresses, Conditions: &registryv1.EndpointConditions{
				Ready:       ptr.Deref(e.Conditions.Ready, true),
				Serving:     ptr.Deref(e.Conditions.Serving, ptr.Deref(e.Conditions.Ready, true)),
				Terminating: ptr.Deref(e.Conditions.Terminating, false),
			}})
		}
	}
	for _, c := range out {
		slices.SortFunc(c.Endpoints, func(a, b *registryv1.Endpoint) int { return compareStrings(a.GetAddresses(), b.GetAddresses()) })
	}
	return out
}

func compareStrings(a, b []string) int { return slices.Compare(a, b) }
