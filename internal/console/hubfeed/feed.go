// Package hubfeed keeps fleetnet-console's model up to date with the hub's
// global entry points: Gateways, HTTPRoutes, MultiClusterLoadBalancers and
// BackendTrafficPolicies with their status, read through informers (list
// and watch only: the console never writes). Every change marks the hub
// dirty; at most every Settle the caches are read whole into the model.
package hubfeed

// The console only reads, and only these.
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways;httproutes,verbs=list;watch
// +kubebuilder:rbac:groups=networking.fleetnet.dev,resources=multiclusterloadbalancers;backendtrafficpolicies,verbs=list;watch

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	"github.com/fleetnet/fleetnet/internal/console/model"
	"github.com/fleetnet/fleetnet/internal/scheme"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Config configures a Feed.
type Config struct {
	// Rest reaches the hub.
	Rest  *rest.Config
	Model *model.Model
	Log   *slog.Logger
	// Settle is the shortest time between two reads of the caches; zero
	// is 200ms.
	Settle time.Duration
}

// Feed follows the hub.
type Feed struct {
	cfg   Config
	dirty atomic.Bool
	// failure is the last list or watch that failed.
	failure atomic.Pointer[failure]
}

// failure is a failed list or watch, and when.
type failure struct {
	msg string
	at  time.Time
}

// failureShown is how long a failed list or watch stays on the page after
// its last retry failed: a reflector says nothing when it recovers.
const failureShown = 30 * time.Second

// New returns a feed; Run follows the hub.
func New(cfg Config) *Feed {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 200 * time.Millisecond
	}
	return &Feed{cfg: cfg}
}

// kinds are what the console reads, each with its list type.
var kinds = []struct {
	name string
	obj  client.Object
}{
	{"Gateway", &gwv1.Gateway{}},
	{"HTTPRoute", &gwv1.HTTPRoute{}},
	{"MultiClusterLoadBalancer", &networkingv1alpha1.MultiClusterLoadBalancer{}},
	{"BackendTrafficPolicy", &networkingv1alpha1.BackendTrafficPolicy{}},
}

// Run follows the hub until ctx ends. A kind whose CRD the hub lacks is
// left out (said on the page), and looked for again every minute.
func (f *Feed) Run(ctx context.Context) error {
	c, err := cache.New(f.cfg.Rest, cache.Options{Scheme: scheme.Scheme,
		// A refused or failing list or watch is said on the page (an
		// unsynced cache says nothing of why) and logged.
		DefaultWatchErrorHandler: func(ctx context.Context, r *toolscache.Reflector, err error) {
			msg := fmt.Sprintf("list and watch of %s: %v", r.TypeDescription(), err)
			if prev := f.failure.Swap(&failure{msg: msg, at: time.Now()}); prev == nil || prev.msg != msg {
				if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
					f.cfg.Log.Error("the hub refuses the console a list or watch: its role lacks a rule", "type", r.TypeDescription(), "err", err)
				} else {
					f.cfg.Log.Info("list or watch of the hub failed; retrying", "type", r.TypeDescription(), "err", err)
				}
			}
			f.markDirty()
		},
	})
	if err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	go func() {
		if err := c.Start(ctx); err != nil {
			f.cfg.Log.Error("hub cache stopped", "err", err)
		}
	}()
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { f.markDirty() },
		UpdateFunc: func(any, any) { f.markDirty() },
		DeleteFunc: func(any) { f.markDirty() },
	}
	watched := map[string]bool{}
	var missing []string
	look := func() {
		missing = missing[:0]
		for _, k := range kinds {
			if watched[k.name] {
				continue
			}
			// A kind the API server does not serve fails here (no REST
			// mapping) instead of an informer retrying for ever.
			inf, err := c.GetInformer(ctx, k.obj, cache.BlockUntilSynced(false))
			if err != nil {
				missing = append(missing, fmt.Sprintf("%s (%v)", k.name, err))
				continue
			}
			if _, err := inf.AddEventHandler(handler); err != nil {
				missing = append(missing, fmt.Sprintf("%s (%v)", k.name, err))
				continue
			}
			watched[k.name] = true
		}
		f.markDirty()
	}
	look()
	settle := time.NewTicker(f.cfg.Settle)
	defer settle.Stop()
	relook := time.NewTicker(time.Minute)
	defer relook.Stop()
	synced := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-relook.C:
			if len(missing) > 0 {
				look()
			}
		case <-settle.C:
		}
		if !f.dirty.Swap(false) {
			continue
		}
		if !synced {
			waitCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			synced = c.WaitForCacheSync(waitCtx)
			cancel()
			if !synced {
				state := model.Feed{}
				if fl := f.failure.Load(); fl != nil {
					state.Error = fl.msg
				}
				f.cfg.Model.SetFeed(model.FeedHub, state)
				f.dirty.Store(true)
				continue
			}
		}
		hub, err := f.read(ctx, c, watched)
		state := model.Feed{Synced: true}
		switch fl := f.failure.Load(); {
		case fl != nil && time.Since(fl.at) < failureShown:
			// Synced, but a watch broke since: the page shows the caches
			// as they are, with the cause, and looks again.
			state.Error = fl.msg
			f.dirty.Store(true)
		case err != nil:
			state.Error = err.Error()
			f.dirty.Store(true)
		case len(missing) > 0:
			state.Error = "not read: " + strings.Join(missing, "; ")
		}
		f.cfg.Model.SetFeed(model.FeedHub, state)
		if err == nil {
			f.cfg.Model.SetHub(hub)
		}
	}
}

func (f *Feed) markDirty() { f.dirty.Store(true) }

// read makes the model's Hub from the caches.
func (f *Feed) read(ctx context.Context, c cache.Cache, watched map[string]bool) (model.Hub, error) {
	h := model.Hub{Gateways: []model.Gateway{}, Routes: []model.Route{}, LoadBalancers: []model.LoadBalancer{}, Policies: []model.Policy{}}
	if watched["Gateway"] {
		var l gwv1.GatewayList
		if err := c.List(ctx, &l); err != nil {
			return h, fmt.Errorf("listing Gateways: %w", err)
		}
		for i := range l.Items {
			h.Gateways = append(h.Gateways, gateway(&l.Items[i]))
		}
	}
	if watched["HTTPRoute"] {
		var l gwv1.HTTPRouteList
		if err := c.List(ctx, &l); err != nil {
			return h, fmt.Errorf("listing HTTPRoutes: %w", err)
		}
		for i := range l.Items {
			h.Routes = append(h.Routes, route(&l.Items[i]))
		}
	}
	if watched["MultiClusterLoadBalancer"] {
		var l networkingv1alpha1.MultiClusterLoadBalancerList
		if err := c.List(ctx, &l); err != nil {
			return h, fmt.Errorf("listing MultiClusterLoadBalancers: %w", err)
		}
		for i := range l.Items {
			h.LoadBalancers = append(h.LoadBalancers, loadBalancer(&l.Items[i]))
		}
	}
	if watched["BackendTrafficPolicy"] {
		var l networkingv1alpha1.BackendTrafficPolicyList
		if err := c.List(ctx, &l); err != nil {
			return h, fmt.Errorf("listing BackendTrafficPolicies: %w", err)
		}
		for i := range l.Items {
			h.Policies = append(h.Policies, policy(&l.Items[i]))
		}
	}
	slices.SortFunc(h.Gateways, func(a, b model.Gateway) int { return byName(a.Namespace, a.Name, b.Namespace, b.Name) })
	slices.SortFunc(h.Routes, func(a, b model.Route) int { return byName(a.Namespace, a.Name, b.Namespace, b.Name) })
	slices.SortFunc(h.LoadBalancers, func(a, b model.LoadBalancer) int { return byName(a.Namespace, a.Name, b.Namespace, b.Name) })
	slices.SortFunc(h.Policies, func(a, b model.Policy) int { return byName(a.Namespace, a.Name, b.Namespace, b.Name) })
	return h, nil
}

func byName(ans, an, bns, bn string) int {
	return cmp.Or(strings.Compare(ans, bns), strings.Compare(an, bn))
}

func conditions(cs []metav1.Condition, parent string) []model.Condition {
	out := make([]model.Condition, 0, len(cs))
	for _, c := range cs {
		out = append(out, model.Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message, Parent: parent})
	}
	return out
}

func gateway(g *gwv1.Gateway) model.Gateway {
	v := model.Gateway{Namespace: g.Namespace, Name: g.Name, Class: string(g.Spec.GatewayClassName),
		Addresses: []string{}, Listeners: []model.Listener{}, Conditions: conditions(g.Status.Conditions, "")}
	for _, a := range g.Status.Addresses {
		v.Addresses = append(v.Addresses, a.Value)
	}
	attached := map[gwv1.SectionName]int32{}
	for _, l := range g.Status.Listeners {
		attached[l.Name] = l.AttachedRoutes
	}
	for _, l := range g.Spec.Listeners {
		lv := model.Listener{Name: string(l.Name), Protocol: string(l.Protocol), Port: int32(l.Port), AttachedRoutes: attached[l.Name]}
		if l.Hostname != nil {
			lv.Hostname = string(*l.Hostname)
		}
		v.Listeners = append(v.Listeners, lv)
	}
	return v
}

func route(r *gwv1.HTTPRoute) model.Route {
	v := model.Route{Namespace: r.Namespace, Name: r.Name, Parents: []string{}, Rules: []model.RouteRule{}, Conditions: []model.Condition{}}
	for _, h := range r.Spec.Hostnames {
		v.Hostnames = append(v.Hostnames, string(h))
	}
	for _, p := range r.Spec.ParentRefs {
		v.Parents = append(v.Parents, parentName(r.Namespace, p))
	}
	for _, p := range r.Status.Parents {
		v.Conditions = append(v.Conditions, conditions(p.Conditions, parentName(r.Namespace, p.ParentRef))...)
	}
	for _, rule := range r.Spec.Rules {
		rv := model.RouteRule{Backends: []model.BackendRef{}}
		for _, b := range rule.BackendRefs {
			ref := model.BackendRef{Kind: "Service", Namespace: r.Namespace, Name: string(b.Name), Weight: 1}
			if b.Kind != nil {
				ref.Kind = string(*b.Kind)
			}
			if b.Namespace != nil {
				ref.Namespace = string(*b.Namespace)
			}
			if b.Port != nil {
				ref.Port = int32(*b.Port)
			}
			if b.Weight != nil {
				ref.Weight = *b.Weight
			}
			rv.Backends = append(rv.Backends, ref)
		}
		v.Rules = append(v.Rules, rv)
	}
	return v
}

func parentName(ns string, p gwv1.ParentReference) string {
	if p.Namespace != nil {
		ns = string(*p.Namespace)
	}
	s := ns + "/" + string(p.Name)
	if p.SectionName != nil {
		s += "/" + string(*p.SectionName)
	}
	return s
}

func loadBalancer(lb *networkingv1alpha1.MultiClusterLoadBalancer) model.LoadBalancer {
	v := model.LoadBalancer{Namespace: lb.Namespace, Name: lb.Name, Backend: lb.Namespace + "/" + lb.Spec.ServiceImportName,
		Addresses: lb.Status.Addresses, Ports: lb.Status.Ports, Clusters: []model.BackendCluster{}, Conditions: conditions(lb.Status.Conditions, "")}
	for _, c := range lb.Status.Clusters {
		v.Clusters = append(v.Clusters, model.BackendCluster{Name: c.Name, State: c.State, Weight: c.Weight, ReadyEndpoints: c.ReadyEndpoints})
	}
	return v
}

func policy(p *networkingv1alpha1.BackendTrafficPolicy) model.Policy {
	v := model.Policy{Namespace: p.Namespace, Name: p.Name, Targets: []string{}, Locality: string(p.Spec.Locality), Conditions: conditions(p.Status.Conditions, "")}
	for _, t := range p.Spec.TargetRefs {
		v.Targets = append(v.Targets, string(t.Kind)+"/"+string(t.Name))
	}
	if p.Spec.Failover != nil {
		for _, t := range p.Spec.Failover.Order {
			if t.Region != "" {
				v.Failover = append(v.Failover, "region "+t.Region)
			} else {
				v.Failover = append(v.Failover, "cluster "+t.Cluster)
			}
		}
	}
	for _, a := range p.Status.Ancestors {
		v.Conditions = append(v.Conditions, conditions(a.Conditions, parentName(p.Namespace, a.AncestorRef))...)
	}
	return v
}
