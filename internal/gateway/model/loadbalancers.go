package model

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// LoadBalancerStatus is the status of one MultiClusterLoadBalancer, without
// Programmed and addresses, which depend on the provider.
type LoadBalancerStatus struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Served: the load balancer is in the model (of a class this
	// controller serves, accepted or Refused).
	Served bool `json:"served"`
	// Refused: the current generation is not accepted; the model holds
	// the last accepted one (edgev1.LoadBalancer's Refused and Hold).
	Refused    bool                                      `json:"refused,omitempty"`
	Conditions []metav1.Condition                        `json:"conditions"`
	Clusters   []networkingv1alpha1.ClusterBackendStatus `json:"clusters"`
	// Ports lists the served ports, e.g. "5432/TCP,53/UDP"; "" when not
	// served.
	Ports           string `json:"ports,omitempty"`
	HealthyClusters int32  `json:"healthyClusters"`
}

// loadBalancers translates the MultiClusterLoadBalancers: those of a class
// in.LoadBalancerClasses names, valid, and whose ports no older load
// balancer and no Gateway listener of gws holds, are served. A load
// balancer whose ServiceImport or port is missing is still served, with no
// endpoints: a missing input never withdraws a port (fail static).
func (b *builder) loadBalancers(gws []edgev1.Gateway) ([]edgev1.LoadBalancer, []LoadBalancerStatus) {
	lbs := make([]*networkingv1alpha1.MultiClusterLoadBalancer, 0, len(b.in.MultiClusterLoadBalancers))
	for i := range b.in.MultiClusterLoadBalancers {
		lb := &b.in.MultiClusterLoadBalancers[i]
		if lb.DeletionTimestamp == nil {
			lbs = append(lbs, lb)
		}
	}
	// The older load balancer keeps a port; creation times have whole
	// seconds, so between two of the same second the one already accepted
	// keeps it: a new object never takes a port from a served one.
	notAccepted := func(lb *networkingv1alpha1.MultiClusterLoadBalancer) int {
		if meta.IsStatusConditionTrue(lb.Status.Conditions, networkingv1alpha1.LoadBalancerConditionAccepted) {
			return 0
		}
		return 1
	}
	slices.SortFunc(lbs, func(x, y *networkingv1alpha1.MultiClusterLoadBalancer) int {
		return cmp.Or(x.CreationTimestamp.Compare(y.CreationTimestamp.Time), cmp.Compare(notAccepted(x), notAccepted(y)),
			cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	// Ports taken, by "port/protocol": Gateway listeners are TCP.
	taken := map[string]string{}
	for _, gw := range gws {
		for _, l := range gw.Listeners {
			taken[fmt.Sprintf("%d/%s", l.Port, edgev1.ProtocolTCP)] = fmt.Sprintf("listener %s of Gateway %s", l.Name, key(gw.Namespace, gw.Name))
		}
	}
	models := []edgev1.LoadBalancer{}
	statuses := []LoadBalancerStatus{}
	for _, lb := range lbs {
		m, st := b.loadBalancer(lb, taken)
		if st.Served {
			models = append(models, m)
		}
		statuses = append(statuses, st)
	}
	slices.SortFunc(models, func(x, y edgev1.LoadBalancer) int {
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	slices.SortFunc(statuses, func(x, y LoadBalancerStatus) int {
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	return models, statuses
}

// loadBalancer decides one MultiClusterLoadBalancer: accepted (valid, of a
// served class, its ports free), then its backends resolved and each
// cluster's state.
func (b *builder) loadBalancer(lb *networkingv1alpha1.MultiClusterLoadBalancer, taken map[string]string) (edgev1.LoadBalancer, LoadBalancerStatus) {
	gen := lb.Generation
	st := LoadBalancerStatus{Namespace: lb.Namespace, Name: lb.Name, Clusters: []networkingv1alpha1.ClusterBackendStatus{}}
	m, problems := translateLoadBalancer(lb)
	class := string(lb.Spec.Class)
	if class == "" {
		class = string(networkingv1alpha1.LoadBalancerClassEdge)
	}
	if reason, msg := b.refusal(lb, m, class, problems, taken); reason != "" {
		st.Conditions = []metav1.Condition{
			cond(networkingv1alpha1.LoadBalancerConditionAccepted, false, reason, msg, gen),
		}
		if reason == networkingv1alpha1.LoadBalancerReasonUnsupportedClass {
			return m, st // left the classes served here: withdrawn
		}
		held, ok := b.heldLoadBalancer(lb, class, msg, taken)
		if !ok {
			return m, st
		}
		st.Served, st.Refused = true, true
		return held, st
	}
	var ports []string
	for _, p := range m.Ports {
		k := fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		taken[k] = "MultiClusterLoadBalancer " + key(lb.Namespace, lb.Name)
		ports = append(ports, k)
	}
	st.Served = true
	m.Class = class
	st.Ports = strings.Join(ports, ",")
	accepted := cond(networkingv1alpha1.LoadBalancerConditionAccepted, true, networkingv1alpha1.LoadBalancerReasonAccepted, "", gen)

	overrides := map[string]networkingv1alpha1.ClusterOverride{}
	for _, o := range lb.Spec.Clusters {
		overrides[o.Name] = o
	}
	br := b.loadBalancerBackends(lb, &m, overrides)
	resolved := cond(networkingv1alpha1.LoadBalancerConditionResolvedRefs, true, networkingv1alpha1.LoadBalancerReasonResolvedRefs, "", gen)
	if len(br.problems) > 0 {
		resolved = cond(networkingv1alpha1.LoadBalancerConditionResolvedRefs, false, br.reason, strings.Join(br.problems, "; "), gen)
	}
	st.Conditions = []metav1.Condition{accepted, resolved}
	st.Clusters, st.HealthyClusters = clusterStates(br.weights, br.ready, overrides)
	return m, st
}

// heldLoadBalancer is the entry of a refused load balancer of a class
// served here: its entry in Input.Previous, frozen, when it had one there
// of the same class whose ports are still free (its ports are then
// taken), or else, when it may be served (it holds the finalizer the
// controller adds to what it serves), an entry that tells its provider to
// hold what it serves; false when it was never served. As for Gateways,
// only deletion or leaving the served classes withdraws a load balancer.
func (b *builder) heldLoadBalancer(lb *networkingv1alpha1.MultiClusterLoadBalancer, class, why string, taken map[string]string) (edgev1.LoadBalancer, bool) {
	if b.in.Previous != nil {
	previous:
		for _, p := range b.in.Previous.LoadBalancers {
			if p.Namespace != lb.Namespace || p.Name != lb.Name || p.Class != class || p.Hold {
				continue
			}
			for _, port := range p.Ports {
				if _, ok := taken[fmt.Sprintf("%d/%s", port.Port, port.Protocol)]; ok {
					break previous // taken by an older one since: cannot be kept
				}
			}
			for _, port := range p.Ports {
				taken[fmt.Sprintf("%d/%s", port.Port, port.Protocol)] = "MultiClusterLoadBalancer " + key(lb.Namespace, lb.Name)
			}
			p.Refused = why
			return p, true
		}
	}
	if !slices.Contains(lb.Finalizers, networkingv1alpha1.LoadBalancerFinalizer) {
		return edgev1.LoadBalancer{}, false
	}
	return edgev1.LoadBalancer{Namespace: lb.Namespace, Name: lb.Name, Generation: lb.Generation, Class: class,
		Ports: []edgev1.LoadBalancerPort{}, Refused: why, Hold: true}, true
}

// refusal is why a load balancer is not accepted (a reason and message),
// or "": invalid fields, a class no provider here serves, or a port an
// earlier one holds.
func (b *builder) refusal(lb *networkingv1alpha1.MultiClusterLoadBalancer, m edgev1.LoadBalancer, class string, problems []string, taken map[string]string) (string, string) {
	switch {
	case len(problems) > 0:
		return networkingv1alpha1.LoadBalancerReasonInvalid, strings.Join(problems, "; ")
	case !slices.Contains(b.in.LoadBalancerClasses, class):
		return networkingv1alpha1.LoadBalancerReasonUnsupportedClass,
			fmt.Sprintf("class %s has no provider in this fleetnet-gateway (it serves: %s)", class, strings.Join(b.in.LoadBalancerClasses, ", "))
	}
	var conflicts []string
	for _, p := range m.Ports {
		k := fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		if holder, ok := taken[k]; ok {
			conflicts = append(conflicts, fmt.Sprintf("port %s is held by %s", k, holder))
		} else if what, ok := b.in.ReservedPorts[p.Port]; ok && p.Protocol == edgev1.ProtocolTCP && class == string(networkingv1alpha1.LoadBalancerClassEdge) {
			conflicts = append(conflicts, fmt.Sprintf("port %s is reserved on the edges: %s", k, what))
		}
	}
	if len(conflicts) > 0 {
		return networkingv1alpha1.LoadBalancerReasonPortConflict, strings.Join(conflicts, "; ")
	}
	return "", ""
}

// backendResolution is what resolving a load balancer's ServiceImport
// found: the problems (with the ResolvedRefs reason) and, per cluster, its
// weight and most ready endpoints on any port.
type backendResolution struct {
	problems []string
	reason   string
	ready    map[string]int32
	weights  map[string]int32
}

// loadBalancerBackends fills in the clusters behind each of m's ports from
// the ServiceImport's imported slices, with the overrides' weights and
// drains.
func (b *builder) loadBalancerBackends(lb *networkingv1alpha1.MultiClusterLoadBalancer, m *edgev1.LoadBalancer, overrides map[string]networkingv1alpha1.ClusterOverride) backendResolution {
	br := backendResolution{reason: networkingv1alpha1.LoadBalancerReasonBackendNotFound, ready: map[string]int32{}, weights: map[string]int32{}}
	si := b.imports[key(lb.Namespace, lb.Spec.ServiceImportName)]
	if si == nil {
		br.problems = append(br.problems, fmt.Sprintf("ServiceImport %s not found", key(lb.Namespace, lb.Spec.ServiceImportName)))
	}
	var sel []*discoveryv1.EndpointSlice
	if si != nil {
		for _, s := range b.slices {
			if s.Namespace == lb.Namespace && s.Labels[mcsv1beta1.LabelServiceName] == si.Name && s.Labels[mcsv1beta1.LabelSourceCluster] != "" {
				sel = append(sel, s)
			}
		}
	}
	for i := range m.Ports {
		p := &m.Ports[i]
		p.Clusters = []edgev1.ClusterEndpoints{}
		if si == nil {
			continue
		}
		j := slices.IndexFunc(si.Spec.Ports, func(sp mcsv1beta1.ServicePort) bool { return sp.Port == p.TargetPort })
		if j < 0 {
			br.problems = append(br.problems, fmt.Sprintf("spec.ports: ServiceImport %s has no port %d (ports: %s)", key(si.Namespace, si.Name), p.TargetPort, importPorts(si.Spec.Ports)))
			continue
		}
		sp := si.Spec.Ports[j]
		proto := sp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		if string(proto) != p.Protocol {
			br.reason = networkingv1alpha1.LoadBalancerReasonProtocolMismatch
			br.problems = append(br.problems, fmt.Sprintf("spec.ports: port %d/%s maps to port %d of ServiceImport %s, which is %s", p.Port, p.Protocol, p.TargetPort, key(si.Namespace, si.Name), proto))
			continue
		}
		p.Clusters = b.clusters(sel, []string{sp.Name}, proto)
		for k := range p.Clusters {
			c := &p.Clusters[k]
			readyAddrs := readyAddresses(*c)
			if o, ok := overrides[c.Cluster]; ok {
				if o.Weight != nil {
					c.Weight = *o.Weight
				}
				c.Draining = o.Drain
			}
			c.EffectiveWeight = int64(c.Weight) * readyAddrs
			if c.Draining {
				c.EffectiveWeight = 0
			}
			br.ready[c.Cluster] = max(br.ready[c.Cluster], int32(readyAddrs))
			br.weights[c.Cluster] = c.Weight
		}
	}
	return br
}

// readyAddresses is how many ready addresses a cluster has, from its
// effective weight when it has a weight, else by counting.
func readyAddresses(c edgev1.ClusterEndpoints) int64 {
	if c.Weight > 0 {
		return c.EffectiveWeight / int64(c.Weight)
	}
	seen := map[string]bool{}
	for _, e := range c.Endpoints {
		if e.Ready {
			seen[e.Address] = true
		}
	}
	return int64(len(seen))
}

// clusterStates is the status of every cluster that serves the load
// balancer or is named by an override, sorted by name, and how many are
// healthy.
func clusterStates(weights, ready map[string]int32, overrides map[string]networkingv1alpha1.ClusterOverride) ([]networkingv1alpha1.ClusterBackendStatus, int32) {
	names := map[string]bool{}
	for n := range weights {
		names[n] = true
	}
	for n := range overrides {
		names[n] = true
	}
	out := []networkingv1alpha1.ClusterBackendStatus{}
	var healthy int32
	for _, n := range slices.Sorted(maps.Keys(names)) {
		cs := networkingv1alpha1.ClusterBackendStatus{Name: n, Weight: weights[n], ReadyEndpoints: ready[n], State: networkingv1alpha1.ClusterStateHealthy}
		o, overridden := overrides[n]
		switch {
		case overridden && o.Drain:
			cs.State = networkingv1alpha1.ClusterStateDraining
		case ready[n] == 0:
			cs.State = networkingv1alpha1.ClusterStateMissing
		}
		if _, ok := weights[n]; !ok && overridden && o.Weight != nil {
			cs.Weight = *o.Weight
		}
		out = append(out, cs)
		if cs.State == networkingv1alpha1.ClusterStateHealthy {
			healthy++
		}
	}
	return out, healthy
}

// translateLoadBalancer fills in defaults and checks what the CRD's schema
// also checks, naming each field: an object stored before a schema change
// must not reach a provider.
func translateLoadBalancer(lb *networkingv1alpha1.MultiClusterLoadBalancer) (edgev1.LoadBalancer, []string) {
	def := edgev1.DefaultBackendPolicy()
	m := edgev1.LoadBalancer{
		Namespace: lb.Namespace, Name: lb.Name, Generation: lb.Generation,
		HealthCheck:          edgev1.HealthCheck{Type: edgev1.HealthCheckTCP, IntervalMillis: def.HealthCheck.IntervalMillis, TimeoutMillis: def.HealthCheck.TimeoutMillis, HealthyThreshold: def.HealthCheck.HealthyThreshold, UnhealthyThreshold: def.HealthCheck.UnhealthyThreshold},
		ConnectTimeoutMillis: def.ConnectTimeoutMillis,
		TCPIdleMillis:        edgev1.DefaultTCPIdleMillis, UDPIdleMillis: edgev1.DefaultUDPIdleMillis, DrainMillis: edgev1.DefaultDrainMillis,
	}
	v := newValidator()
	if lb.Spec.ServiceImportName == "" {
		v.bad("spec.serviceImportName: required")
	}
	if len(lb.Spec.Ports) == 0 {
		v.bad("spec.ports: at least one is required")
	}
	seen := map[string]bool{}
	for i, p := range lb.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = edgev1.ProtocolTCP
		}
		if proto != edgev1.ProtocolTCP && proto != edgev1.ProtocolUDP {
			v.bad("spec.ports[%d].protocol: %q is not TCP or UDP", i, p.Protocol)
		}
		v.between(fmt.Sprintf("spec.ports[%d].port", i), p.Port, 1, 65535)
		target := p.Port
		if p.TargetPort != nil {
			target = *p.TargetPort
			v.between(fmt.Sprintf("spec.ports[%d].targetPort", i), target, 1, 65535)
		}
		k := fmt.Sprintf("%d/%s", p.Port, proto)
		if seen[k] {
			v.bad("spec.ports[%d]: %s is listed twice", i, k)
		}
		seen[k] = true
		m.Ports = append(m.Ports, edgev1.LoadBalancerPort{Port: p.Port, Protocol: proto, TargetPort: target})
	}
	slices.SortFunc(m.Ports, func(x, y edgev1.LoadBalancerPort) int {
		return cmp.Or(cmp.Compare(x.Port, y.Port), cmp.Compare(x.Protocol, y.Protocol))
	})
	names := map[string]bool{}
	for i, o := range lb.Spec.Clusters {
		if names[o.Name] {
			v.bad("spec.clusters[%d].name: %q is listed twice", i, o.Name)
		}
		names[o.Name] = true
		if o.Weight != nil {
			v.between(fmt.Sprintf("spec.clusters[%d].weight", i), *o.Weight, 0, MaxClusterWeight)
		}
	}
	if hc := lb.Spec.HealthCheck; hc != nil {
		h := &m.HealthCheck
		h.IntervalMillis = v.duration("spec.healthCheck.interval", hc.Interval, 100*time.Millisecond, 5*time.Minute, h.IntervalMillis)
		h.TimeoutMillis = v.duration("spec.healthCheck.timeout", hc.Timeout, 10*time.Millisecond, 0, h.TimeoutMillis)
		if h.TimeoutMillis >= h.IntervalMillis {
			v.bad("spec.healthCheck.timeout: %s must be shorter than spec.healthCheck.interval %s", millisString(h.TimeoutMillis), millisString(h.IntervalMillis))
		}
		if hc.HealthyThreshold != 0 {
			v.between("spec.healthCheck.healthyThreshold", hc.HealthyThreshold, 1, 10)
			h.HealthyThreshold = hc.HealthyThreshold
		}
		if hc.UnhealthyThreshold != 0 {
			v.between("spec.healthCheck.unhealthyThreshold", hc.UnhealthyThreshold, 1, 10)
			h.UnhealthyThreshold = hc.UnhealthyThreshold
		}
	}
	if t := lb.Spec.Timeouts; t != nil {
		m.TCPIdleMillis = v.duration("spec.timeouts.tcpIdle", t.TCPIdle, time.Second, 24*time.Hour, m.TCPIdleMillis)
		m.UDPIdleMillis = v.duration("spec.timeouts.udpIdle", t.UDPIdle, time.Second, time.Hour, m.UDPIdleMillis)
		m.DrainMillis = v.duration("spec.timeouts.drain", t.Drain, 0, time.Hour, m.DrainMillis)
		m.ConnectTimeoutMillis = v.duration("spec.timeouts.connect", t.Connect, 10*time.Millisecond, time.Minute, m.ConnectTimeoutMillis)
	}
	return m, v.problems
}

func millisString(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() }
