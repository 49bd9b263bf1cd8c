package model

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// BackendTrafficPolicyStatus is the status of one BackendTrafficPolicy.
type BackendTrafficPolicyStatus struct {
	Namespace  string                      `json:"namespace"`
	Name       string                      `json:"name"`
	Conditions []metav1.Condition          `json:"conditions"`
	Ancestors  []gwv1.PolicyAncestorStatus `json:"ancestors"`
}

// maxAncestors is the CRD's limit on status.ancestors.
const maxAncestors = 16

// policyTarget is a backend a policy may target.
type policyTarget struct{ kind, namespace, name string }

func (t policyTarget) String() string { return t.kind + " " + t.namespace + "/" + t.name }

// policyState is one policy: its translation, or why it has none, and
// what became of each target.
type policyState struct {
	obj      *networkingv1alpha1.BackendTrafficPolicy
	policy   edgev1.BackendPolicy
	problems []string
	// notes say, per target not applied, why.
	notes   []string
	applied int
	// conflicted: a target exists but an older policy holds it.
	conflicted bool
}

// resolvePolicies translates every BackendTrafficPolicy and gives each
// target to the oldest valid policy that names it (then the first by
// namespace/name), as Gateway API policy attachment resolves conflicts.
func (b *builder) resolvePolicies() {
	b.policyByTarget = map[policyTarget]*policyState{}
	for i := range b.in.BackendTrafficPolicies {
		p := &b.in.BackendTrafficPolicies[i]
		ps := &policyState{obj: p}
		ps.policy, ps.problems = translatePolicy(p)
		b.policies = append(b.policies, ps)
	}
	slices.SortFunc(b.policies, func(x, y *policyState) int { return networkingv1alpha1.ComparePrecedence(x.obj, y.obj) })
	for _, ps := range b.policies {
		if len(ps.problems) > 0 {
			continue
		}
		for _, ref := range ps.obj.Spec.TargetRefs {
			t := policyTarget{kind: string(ref.Kind), namespace: ps.obj.Namespace, name: string(ref.Name)}
			exists := false
			switch t.kind {
			case edgev1.KindService:
				exists = b.services[key(t.namespace, t.name)] != nil
			case edgev1.KindServiceImport:
				exists = b.imports[key(t.namespace, t.name)] != nil
			}
			switch holder := b.policyByTarget[t]; {
			case !exists:
				ps.notes = append(ps.notes, t.String()+" not found")
			case holder != nil:
				ps.conflicted = true
				ps.notes = append(ps.notes, fmt.Sprintf("%s: BackendTrafficPolicy %s applies there (the older policy wins)", t, key(holder.obj.Namespace, holder.obj.Name)))
			default:
				b.policyByTarget[t] = ps
				ps.applied++
			}
		}
	}
}

// backendPolicy is the policy of a backend: its policy's or the defaults.
func (b *builder) backendPolicy(kind, namespace, name string) edgev1.BackendPolicy {
	if ps := b.policyByTarget[policyTarget{kind, namespace, name}]; ps != nil {
		return ps.policy
	}
	return edgev1.DefaultBackendPolicy()
}

// policyStatuses reports every policy, with the Gateways of m whose
// routes use it as its ancestors.
func (b *builder) policyStatuses(m edgev1.Model) []BackendTrafficPolicyStatus {
	gatewaysOf := map[string][]string{}
	for _, gw := range m.Gateways {
		seen := map[string]bool{}
		for _, l := range gw.Listeners {
			for _, vh := range l.VirtualHosts {
				for _, r := range vh.Routes {
					for _, be := range r.Backends {
						if src := be.Policy.Source; src != "" && !seen[src] {
							seen[src] = true
							gatewaysOf[src] = append(gatewaysOf[src], key(gw.Namespace, gw.Name))
						}
					}
				}
			}
		}
	}
	out := []BackendTrafficPolicyStatus{}
	for _, ps := range b.policies {
		p := ps.obj
		st := BackendTrafficPolicyStatus{Namespace: p.Namespace, Name: p.Name, Ancestors: []gwv1.PolicyAncestorStatus{}}
		accepted := cond(string(gwv1.PolicyConditionAccepted), true, string(gwv1.PolicyReasonAccepted), "", p.Generation)
		switch {
		case len(ps.problems) > 0:
			accepted.Status, accepted.Reason = metav1.ConditionFalse, string(gwv1.PolicyReasonInvalid)
			accepted.Message = strings.Join(ps.problems, "; ")
		case ps.applied == 0 && ps.conflicted:
			accepted.Status, accepted.Reason = metav1.ConditionFalse, string(gwv1.PolicyReasonConflicted)
			accepted.Message = strings.Join(ps.notes, "; ")
		case ps.applied == 0:
			accepted.Status, accepted.Reason = metav1.ConditionFalse, string(gwv1.PolicyReasonTargetNotFound)
			accepted.Message = strings.Join(ps.notes, "; ")
		default:
			var applied []string
			for _, ref := range p.Spec.TargetRefs {
				t := policyTarget{kind: string(ref.Kind), namespace: p.Namespace, name: string(ref.Name)}
				if b.policyByTarget[t] == ps {
					applied = append(applied, t.String())
				}
			}
			accepted.Message = "applies to " + strings.Join(applied, ", ")
			if len(ps.notes) > 0 {
				accepted.Message += "; not to " + strings.Join(ps.notes, "; ")
			}
		}
		st.Conditions = []metav1.Condition{accepted}
		gws := gatewaysOf[key(p.Namespace, p.Name)]
		for _, g := range gws[:min(len(gws), maxAncestors)] {
			ns, name, _ := strings.Cut(g, "/")
			gwNS := gwv1.Namespace(ns)
			st.Ancestors = append(st.Ancestors, gwv1.PolicyAncestorStatus{
				AncestorRef: gwv1.ParentReference{
					Group: new(gwv1.Group(gwv1.GroupName)), Kind: new(gwv1.Kind("Gateway")),
					Namespace: &gwNS, Name: gwv1.ObjectName(name),
				},
				ControllerName: gwv1.GatewayController(b.in.ControllerName),
				Conditions:     []metav1.Condition{accepted},
			})
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(x, y BackendTrafficPolicyStatus) int {
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	return out
}

// translatePolicy turns a policy's spec into a BackendPolicy, or says
// what is wrong with it, naming each field and value. The CRD's schema
// refuses most of this already; the controller checks again for objects
// stored before a schema change, and because a value the data plane
// cannot honour must never reach it.
func translatePolicy(p *networkingv1alpha1.BackendTrafficPolicy) (edgev1.BackendPolicy, []string) {
	out := edgev1.DefaultBackendPolicy()
	out.Source = key(p.Namespace, p.Name)
	v := newValidator()
	bad, between, duration := v.bad, v.between, v.duration
	seen := map[gwv1.LocalPolicyTargetReference]bool{}
	if len(p.Spec.TargetRefs) == 0 {
		bad("spec.targetRefs: at least one is required")
	}
	for i, ref := range p.Spec.TargetRefs {
		ok := (ref.Group == "" && ref.Kind == edgev1.KindService) || (ref.Group == mcsv1beta1.GroupName && ref.Kind == edgev1.KindServiceImport)
		if !ok {
			bad("spec.targetRefs[%d]: group %q kind %q is not a Service (group \"\") or a ServiceImport (group %s)", i, ref.Group, ref.Kind, mcsv1beta1.GroupName)
		}
		if seen[ref] {
			bad("spec.targetRefs[%d]: %s %q is named twice", i, ref.Kind, ref.Name)
		}
		seen[ref] = true
	}

	if hc := p.Spec.HealthCheck; hc != nil {
		h := &out.HealthCheck
		switch hc.Type {
		case "", networkingv1alpha1.HealthCheckTCP:
			h.Type = edgev1.HealthCheckTCP
			if hc.HTTP != nil {
				bad("spec.healthCheck.http: only allowed with type HTTP")
			}
		case networkingv1alpha1.HealthCheckHTTP:
			h.Type = edgev1.HealthCheckHTTP
			if hc.HTTP == nil {
				bad("spec.healthCheck.http: required with type HTTP")
				break
			}
			h.Path = hc.HTTP.Path
			if !strings.HasPrefix(h.Path, "/") || strings.ContainsAny(h.Path, " \t\r\n?#") {
				bad("spec.healthCheck.http.path: %q must start with / and hold no spaces, ? or #", h.Path)
			}
			if hc.HTTP.Hostname != nil {
				h.Hostname = string(*hc.HTTP.Hostname)
				for _, msg := range validation.IsDNS1123Subdomain(h.Hostname) {
					bad("spec.healthCheck.http.hostname: %q: %s", h.Hostname, msg)
				}
			}
		default:
			bad("spec.healthCheck.type: %q is not TCP or HTTP", hc.Type)
		}
		h.IntervalMillis = duration("spec.healthCheck.interval", hc.Interval, 100*time.Millisecond, 5*time.Minute, h.IntervalMillis)
		h.TimeoutMillis = duration("spec.healthCheck.timeout", hc.Timeout, 10*time.Millisecond, 0, h.TimeoutMillis)
		if h.TimeoutMillis >= h.IntervalMillis {
			bad("spec.healthCheck.timeout: %s must be shorter than spec.healthCheck.interval %s", millisString(h.TimeoutMillis), millisString(h.IntervalMillis))
		}
		if hc.HealthyThreshold != 0 {
			between("spec.healthCheck.healthyThreshold", hc.HealthyThreshold, 1, 10)
			h.HealthyThreshold = hc.HealthyThreshold
		}
		if hc.UnhealthyThreshold != 0 {
			between("spec.healthCheck.unhealthyThreshold", hc.UnhealthyThreshold, 1, 10)
			h.UnhealthyThreshold = hc.UnhealthyThreshold
		}
	}
	if ph := p.Spec.PassiveHealthCheck; ph != nil {
		if ph.Consecutive5xx != nil {
			between("spec.passiveHealthCheck.consecutive5xx", *ph.Consecutive5xx, 0, 1000)
			out.Passive.Consecutive5xx = *ph.Consecutive5xx
		}
		out.Passive.EjectionMillis = duration("spec.passiveHealthCheck.ejectionTime", ph.EjectionTime, time.Second, time.Hour, out.Passive.EjectionMillis)
	}
	if r := p.Spec.Retry; r != nil {
		if r.Attempts != nil {
			between("spec.retry.attempts", *r.Attempts, 0, 5)
			out.Retry.Attempts = *r.Attempts
		}
		for i, c := range r.Codes {
			between(fmt.Sprintf("spec.retry.codes[%d]", i), c, 400, 599)
		}
		out.Retry.Codes = slices.Sorted(slices.Values(r.Codes))
		out.Retry.Codes = slices.Compact(out.Retry.Codes)
	}
	if t := p.Spec.Timeouts; t != nil {
		out.ConnectTimeoutMillis = duration("spec.timeouts.connect", t.Connect, 10*time.Millisecond, time.Minute, out.ConnectTimeoutMillis)
		if t.BackendRequest != nil {
			out.BackendRequestMillis = duration("spec.timeouts.backendRequest", *t.BackendRequest, time.Millisecond, 0, 0)
		}
	}
	switch p.Spec.Locality {
	case "", networkingv1alpha1.LocalityWeighted:
		out.Locality = edgev1.LocalityWeighted
	case networkingv1alpha1.LocalityLocalFirst:
		out.Locality = edgev1.LocalityLocalFirst
		if f := p.Spec.Failover; f != nil {
			for _, o := range f.Order {
				out.Failover = append(out.Failover, edgev1.FailoverStep{Cluster: o.Cluster, Region: o.Region})
			}
		}
	default:
		bad("spec.locality: %q is not Weighted or LocalFirst", p.Spec.Locality)
	}
	return out, v.problems
}
