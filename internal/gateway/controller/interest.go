package controller

import (
	"context"
	"sync"

	"github.com/fleetnet/fleetnet/internal/gateway/model"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// interest is what the model's inputs reference: the Services and
// ServiceImports that routes, load balancers and policies name (and so
// their EndpointSlices), and the Secrets that listeners name. A change of
// any other Service, ServiceImport, EndpointSlice or Secret cannot change
// the model, and is not reconciled: on a hub that imports thousands of
// services for a few routes, the endpoint churn of the others would
// otherwise rebuild the whole model at every change.
//
// Keys are compared by namespace and name whatever the kind, which
// over-includes a Service and a ServiceImport of one name; that only
// costs a rebuild.
type interest struct {
	mu sync.RWMutex
	// known is false until the first model is built: until then every
	// event passes.
	known            bool
	backends, secret map[types.NamespacedName]bool
}

// set replaces the interest with in's references and reports whether it
// gained a key: an event of that object may have been filtered out while
// the model that references it was being built, so the caller builds once
// more.
func (i *interest) set(in model.Input) (gained bool) {
	backends, secrets := references(in)
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.known {
		for k := range backends {
			gained = gained || !i.backends[k]
		}
		for k := range secrets {
			gained = gained || !i.secret[k]
		}
	}
	i.known, i.backends, i.secret = true, backends, secrets
	return gained
}

// wants reports whether an event of obj may change the model.
func (i *interest) wants(obj client.Object) bool {
	i.mu.RLock()
	defer i.mu.RUnlock()
	if !i.known {
		return true
	}
	ns := obj.GetNamespace()
	switch obj.(type) {
	case *discoveryv1.EndpointSlice:
		l := obj.GetLabels()
		return i.backends[types.NamespacedName{Namespace: ns, Name: l[discoveryv1.LabelServiceName]}] ||
			i.backends[types.NamespacedName{Namespace: ns, Name: l[mcsv1beta1.LabelServiceName]}]
	case *corev1.Secret:
		return i.secret[types.NamespacedName{Namespace: ns, Name: obj.GetName()}]
	default: // Service, ServiceImport
		return i.backends[types.NamespacedName{Namespace: ns, Name: obj.GetName()}]
	}
}

// enqueue maps an event to the model key when the model may depend on it.
func (i *interest) enqueue(_ context.Context, obj client.Object) []reconcile.Request {
	if !i.wants(obj) {
		return nil
	}
	return []reconcile.Request{modelKey}
}

// references collects in's references to backends and Secrets.
func references(in model.Input) (backends, secrets map[types.NamespacedName]bool) {
	backends, secrets = map[types.NamespacedName]bool{}, map[types.NamespacedName]bool{}
	backend := func(ns string, ref gwv1.BackendObjectReference) {
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		backends[types.NamespacedName{Namespace: ns, Name: string(ref.Name)}] = true
	}
	mirrors := func(ns string, fs []gwv1.HTTPRouteFilter) {
		for _, f := range fs {
			if f.RequestMirror != nil {
				backend(ns, f.RequestMirror.BackendRef)
			}
		}
	}
	for _, r := range in.HTTPRoutes {
		for _, rule := range r.Spec.Rules {
			mirrors(r.Namespace, rule.Filters)
			for _, b := range rule.BackendRefs {
				backend(r.Namespace, b.BackendObjectReference)
				mirrors(r.Namespace, b.Filters)
			}
		}
	}
	for _, lb := range in.MultiClusterLoadBalancers {
		backends[types.NamespacedName{Namespace: lb.Namespace, Name: lb.Spec.ServiceImportName}] = true
	}
	for _, p := range in.BackendTrafficPolicies {
		for _, t := range p.Spec.TargetRefs {
			backends[types.NamespacedName{Namespace: p.Namespace, Name: string(t.Name)}] = true
		}
	}
	for _, gw := range in.Gateways {
		for _, l := range gw.Spec.Listeners {
			if l.TLS == nil {
				continue
			}
			for _, ref := range l.TLS.CertificateRefs {
				ns := gw.Namespace
				if ref.Namespace != nil {
					ns = string(*ref.Namespace)
				}
				secrets[types.NamespacedName{Namespace: ns, Name: string(ref.Name)}] = true
			}
		}
	}
	return backends, secrets
}
