package diagnose

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Status is a step's verdict.
type Status int

const (
	// OK: the step holds.
	OK Status = iota
	// Warn: the step holds but something is off (stale, partial).
	Warn
	// Fail: the path breaks here.
	Fail
	// Skip: the step could not be checked (no input for it, or an
	// earlier step failed that it depends on).
	Skip
)

// String returns the mark the report shows.
func (s Status) String() string {
	switch s {
	case OK:
		return "✓"
	case Warn:
		return "!"
	case Fail:
		return "✗"
	default:
		return "-"
	}
}

// Step is one checked link of the path.
type Step struct {
	// Name says what was checked and where ("export in east").
	Name   string
	Status Status
	// Detail is what was found: the evidence for the verdict.
	Detail string
	// Fix says what to do; empty when the step holds.
	Fix string
}

// Failed reports whether any step failed.
func Failed(steps []Step) bool {
	return slices.ContainsFunc(steps, func(s Step) bool { return s.Status == Fail })
}

// Diagnose walks the path of f.Target in order: the exports in their
// clusters, the registry (leases, exports, merge), the import in the target
// cluster, its derived Service and slices, DNS, and the edge's part (the
// hub's routes and load balancers of the ServiceImport, their Gateways, the
// edges' endpoint health). It is pure: everything comes from f.
func Diagnose(f *Facts) []Step {
	var steps []Step
	steps = append(steps, registryReachable(f)...)
	for _, c := range exportingClusters(f) {
		steps = append(steps, serviceExport(f, c))
		if f.Registry != nil && f.Registry.Err == nil {
			steps = append(steps, lease(f, c, "exporting"), registryExport(f, c))
		}
	}
	steps = append(steps, mergedImport(f))
	if f.Registry != nil && f.Registry.Err == nil {
		steps = append(steps, lease(f, f.Target.Cluster, "importing"))
	}
	steps = append(steps, importingCluster(f)...)
	steps = append(steps, clustersetDNS(f)...)
	steps = append(steps, edgeSteps(f)...)
	return steps
}

// exportingClusters returns, sorted, the clusters that export the service:
// those with an export in the registry and those with a ServiceExport.
func exportingClusters(f *Facts) []string {
	ids := sets.New[string]()
	if r := f.Registry; r != nil {
		for _, e := range r.Exports {
			ids.Insert(e.GetKey().GetClusterId())
		}
	}
	for id, c := range f.Clusters {
		if c.Export != nil {
			ids.Insert(id)
		}
	}
	return sets.List(ids)
}

func registryReachable(f *Facts) []Step {
	r := f.Registry
	switch {
	case r == nil:
		return []Step{{Name: "registry", Status: Skip, Detail: "not asked", Fix: "give --registry and its credentials to check the registry's exports, merge and leases"}}
	case r.Err != nil:
		return []Step{{Name: "registry", Status: Fail, Detail: fmt.Sprintf("%s cannot be read: %v", r.Address, r.Err),
			Fix: "check --registry, --ca-file and the credentials (--cert-file/--key-file or --token-file)"}}
	}
	return []Step{{Name: "registry", Status: OK, Detail: fmt.Sprintf("%s answers: %d clusters, %d exports of %s/%s",
		r.Address, len(r.Clusters), len(r.Exports), f.Target.Namespace, f.Target.Name)}}
}

// serviceExport checks cluster's ServiceExport and the conditions the agent
// there sets on it.
func serviceExport(f *Facts, cluster string) Step {
	s := Step{Name: "ServiceExport in " + cluster}
	c := f.Clusters[cluster]
	switch {
	case c == nil:
		s.Status, s.Detail, s.Fix = Skip, "cluster not looked at", fmt.Sprintf("give a kube context for %s (--context %s=CONTEXT)", cluster, cluster)
		return s
	case c.Err != nil:
		s.Status, s.Detail, s.Fix = Skip, c.Err.Error(), fmt.Sprintf("give a kube context that reaches %s (--context %s=CONTEXT)", cluster, cluster)
		return s
	case c.Export == nil:
		// Only reached when the registry still holds an export from here.
		s.Status, s.Detail = Fail, "none, but the registry holds an export from "+cluster
		s.Fix = fmt.Sprintf("the agent of %s has not withdrawn it: check that fleetnet-agent runs there; the registry drops it when the cluster's lease expires", cluster)
		return s
	}
	conds := c.Export.Status.Conditions
	if v := meta.FindStatusCondition(conds, string(mcsv1beta1.ServiceExportConditionValid)); v != nil && v.Status == metav1.ConditionFalse {
		s.Status, s.Detail = Fail, condText(v)
		s.Fix = invalidExportFix(v.Reason, cluster, f.Target)
		return s
	}
	if cf := meta.FindStatusCondition(conds, string(mcsv1beta1.ServiceExportConditionConflict)); cf != nil && cf.Status == metav1.ConditionTrue {
		s.Status, s.Detail = Fail, condText(cf)
		s.Fix = "make the exporting clusters' Services agree on the field the message names; until then the oldest export's value is used everywhere"
		return s
	}
	ready := meta.FindStatusCondition(conds, string(mcsv1beta1.ServiceExportConditionReady))
	switch {
	case ready == nil:
		s.Status, s.Detail = Fail, "no Ready condition: no agent has handled it"
		s.Fix = fmt.Sprintf("check that fleetnet-agent runs in %s (in the namespace it was installed in) and read its log", cluster)
	case ready.Status != metav1.ConditionTrue:
		s.Status, s.Detail = Fail, condText(ready)
		s.Fix = fmt.Sprintf("the agent of %s has not published the export: read the message, and its log; %s means it cannot reach the registry", cluster, keys.ReasonRegistryUnavailable)
	default:
		s.Status, s.Detail = OK, "Valid, Ready, no conflict"
	}
	return s
}

// invalidExportFix says what cures a Valid=False reason.
func invalidExportFix(reason, cluster string, t Target) string {
	switch reason {
	case string(mcsv1beta1.ServiceExportReasonNoService):
		return fmt.Sprintf("create Service %s/%s in %s, or delete the ServiceExport", t.Namespace, t.Name, cluster)
	case string(mcsv1beta1.ServiceExportReasonInvalidServiceType):
		return "ExternalName Services cannot be exported: export a Service with a selector or with EndpointSlices"
	case keys.ReasonRegistryRejected:
		return "the registry refused the export: correct the Service field the message names"
	}
	return "correct the ServiceExport or its annotations as the message says"
}

// lease checks that cluster is registered and its lease live: an expired
// lease takes the cluster's exports out of the merge and stops its imports.
func lease(f *Facts, cluster, role string) Step {
	s := Step{Name: "lease of " + cluster}
	i := slices.IndexFunc(f.Registry.Clusters, func(c *registryv1.Cluster) bool { return c.GetId() == cluster })
	if i < 0 {
		s.Status, s.Detail = Fail, cluster+" is not registered"
		s.Fix = fmt.Sprintf("start fleetnet-agent in %s with --cluster-id %s (or check the id it uses)", cluster, cluster)
		return s
	}
	c := f.Registry.Clusters[i]
	if !c.GetLive() {
		s.Status = Fail
		s.Detail = "expired"
		if t := c.GetLeaseExpiresAt(); t != nil {
			s.Detail = fmt.Sprintf("expired %s ago (%s)", f.Now.Sub(t.AsTime()).Round(time.Second), t.AsTime().UTC().Format(time.RFC3339))
		}
		if role == "exporting" {
			s.Detail += ": its exports take no part in the merge"
		} else {
			s.Detail += ": its imports are not kept up to date"
		}
		s.Fix = fmt.Sprintf("the agent of %s does not renew its lease: check that it runs and reaches the registry (its log, its registry credentials)", cluster)
		return s
	}
	s.Status, s.Detail = OK, "live"
	if t := c.GetLeaseExpiresAt(); t != nil {
		s.Detail = fmt.Sprintf("live, renewed until %s", t.AsTime().UTC().Format(time.RFC3339))
	}
	return s
}

// registryExport checks cluster's export in the registry and its merge
// status.
func registryExport(f *Facts, cluster string) Step {
	s := Step{Name: "registry export from " + cluster}
	r := f.Registry
	i := slices.IndexFunc(r.Exports, func(e *registryv1.Export) bool { return e.GetKey().GetClusterId() == cluster })
	if i < 0 {
		s.Status, s.Detail = Fail, "the registry holds no export from "+cluster
		s.Fix = fmt.Sprintf("the agent of %s has not published it: see the ServiceExport's conditions and the agent's log", cluster)
		return s
	}
	e := r.Exports[i]
	var st *registryv1.ExportStatus
	for _, x := range r.Statuses {
		if x.GetKey().GetClusterId() == cluster {
			st = x
		}
	}
	if st != nil && len(st.GetConflicts()) > 0 {
		var msgs []string
		for _, c := range st.GetConflicts() {
			msgs = append(msgs, c.GetReason()+": "+c.GetMessage())
		}
		s.Status, s.Detail = Fail, "conflicts: "+strings.Join(msgs, "; ")
		s.Fix = "make the exporting clusters' Services agree; the oldest export's value wins meanwhile"
		return s
	}
	if st != nil && !st.GetParticipating() {
		s.Status, s.Detail = Fail, "not participating in the merge"
		s.Fix = fmt.Sprintf("only live clusters' exports take part: see the lease of %s", cluster)
		return s
	}
	if target := f.Target.Cluster; !reaches(r, e, target) {
		// Scoped away from the target: its endpoints never go there. The
		// path breaks when no other export reaches it.
		s.Status = Fail
		for _, other := range r.Exports {
			if reaches(r, other, target) {
				s.Status = Warn
			}
		}
		if sel := e.GetExportToSelector(); sel != "" {
			s.Detail = fmt.Sprintf("scoped to %s (%s): the registry does not send %s's endpoints to %s", scopeOf(e), keys.AnnotationExportToSelector, cluster, target)
			s.Fix = fmt.Sprintf("if %s should reach it, give %s a ClusterProperty that %s matches, or add %s to the annotation %s of ServiceExport %s/%s in %s (or remove the annotations)",
				target, target, sel, target, keys.AnnotationExportTo, f.Target.Namespace, f.Target.Name, cluster)
			return s
		}
		s.Detail = fmt.Sprintf("scoped to %s (%s): the registry does not send %s's endpoints to %s", strings.Join(e.GetExportTo(), ", "), keys.AnnotationExportTo, cluster, target)
		s.Fix = fmt.Sprintf("if %s should reach it, add %s to the annotation %s of ServiceExport %s/%s in %s (or remove the annotation)",
			target, target, keys.AnnotationExportTo, f.Target.Namespace, f.Target.Name, cluster)
		return s
	}
	s.Status = OK
	s.Detail = fmt.Sprintf("%s, ports %s, participating", e.GetType(), ports(e.GetPorts()))
	if len(e.GetExportTo()) > 0 || e.GetExportToSelector() != "" {
		s.Detail += ", scoped to " + scopeOf(e)
	}
	if st != nil {
		s.Detail += fmt.Sprintf(", %d endpoint chunks", len(st.GetEndpointChunks()))
	}
	return s
}

// reaches says whether the registry sends e's endpoints to target: e is
// unscoped, target exports it, names it (fleetnet.dev/export-to), or is
// among the clusters the registry found in its scope (imported_by, which
// a selector's matches are known by).
func reaches(r *RegistryFacts, e *registryv1.Export, target string) bool {
	to, sel := e.GetExportTo(), e.GetExportToSelector()
	if (len(to) == 0 && sel == "") || e.GetKey().GetClusterId() == target || slices.Contains(to, target) {
		return true
	}
	for _, st := range r.Statuses {
		if st.GetKey().GetClusterId() == e.GetKey().GetClusterId() && slices.Contains(st.GetImportedBy(), target) {
			return true
		}
	}
	return false
}

// scopeOf describes an export's scope: the clusters named and the
// selector.
func scopeOf(e *registryv1.Export) string {
	parts := slices.Clone(e.GetExportTo())
	if sel := e.GetExportToSelector(); sel != "" {
		parts = append(parts, "the clusters matching "+sel)
	}
	return strings.Join(parts, ", ")
}

// mergedImport checks that the registry has merged an import for the
// target cluster.
func mergedImport(f *Facts) Step {
	s := Step{Name: "registry merge"}
	r := f.Registry
	switch {
	case r == nil || r.Err != nil:
		s.Status, s.Detail = Skip, "registry not read"
		return s
	case r.Import == nil && slices.ContainsFunc(r.Exports, func(e *registryv1.Export) bool {
		return clusterLive(r, e.GetKey().GetClusterId()) && !reaches(r, e, f.Target.Cluster)
	}) && !slices.ContainsFunc(r.Exports, func(e *registryv1.Export) bool {
		return clusterLive(r, e.GetKey().GetClusterId()) && reaches(r, e, f.Target.Cluster)
	}):
		s.Status, s.Detail = Fail, fmt.Sprintf("no import for %s: every live export is scoped away from it", f.Target.Cluster)
		s.Fix = "see the registry export steps: each says how to bring " + f.Target.Cluster + " into its scope"
		return s
	case r.Import == nil:
		s.Status, s.Detail = Fail, "no import: no live cluster exports the service"
		s.Fix = fmt.Sprintf("export Service %s/%s (a ServiceExport of that name) in a cluster whose agent is live", f.Target.Namespace, f.Target.Name)
		return s
	}
	s.Status = OK
	s.Detail = fmt.Sprintf("%s, ports %s, from %s", r.Import.GetType(), ports(r.Import.GetPorts()), strings.Join(importClusters(r.Import), ", "))
	return s
}

func importClusters(imp *registryv1.Import) []string {
	var ids []string
	for _, c := range imp.GetClusters() {
		ids = append(ids, c.GetClusterId())
	}
	sort.Strings(ids)
	return ids
}

// importingCluster checks the target cluster's namespace, ServiceImport,
// derived Service and EndpointSlices. Once one is missing the later ones
// are skipped: they could only repeat the cause.
func importingCluster(f *Facts) []Step {
	t := f.Target
	c := f.Clusters[t.Cluster]
	in := " in " + t.Cluster
	switch {
	case c == nil:
		return []Step{{Name: "cluster " + t.Cluster, Status: Fail, Detail: "not looked at", Fix: fmt.Sprintf("give a kube context for %s (--context %s=CONTEXT)", t.Cluster, t.Cluster)}}
	case c.Err != nil:
		return []Step{{Name: "cluster " + t.Cluster, Status: Fail, Detail: c.Err.Error(), Fix: fmt.Sprintf("give a kube context that reaches %s (--context %s=CONTEXT, --kubeconfig)", t.Cluster, t.Cluster)}}
	case !c.NamespaceExists:
		return []Step{{Name: "namespace" + in, Status: Fail, Detail: fmt.Sprintf("namespace %s does not exist in %s", t.Namespace, t.Cluster),
			Fix: fmt.Sprintf("the agent imports only into existing namespaces (namespace sameness): kubectl --context %s create namespace %s", t.Cluster, t.Namespace)}}
	}
	steps := []Step{{Name: "namespace" + in, Status: OK, Detail: t.Namespace + " exists"}}
	si := serviceImport(f, c)
	steps = append(steps, si)
	if c.Import == nil {
		return steps
	}
	steps = append(steps, derivedService(f, c))
	steps = append(steps, endpointSlices(f, c))
	steps = append(steps, networkPath(f, c)...)
	return steps
}

func serviceImport(f *Facts, c *ClusterFacts) Step {
	t := f.Target
	s := Step{Name: "ServiceImport in " + t.Cluster}
	registryRead := f.Registry != nil && f.Registry.Err == nil
	if c.Import == nil {
		s.Status, s.Detail = Fail, "none"
		switch {
		case registryRead && f.Registry.Import == nil:
			s.Detail += ": the registry has no import to give " + t.Cluster
			s.Fix = "see the registry merge step"
		case registryRead && !clusterLive(f.Registry, t.Cluster):
			s.Detail += ", though the registry has the import"
			s.Fix = "see the lease of " + t.Cluster + ": its agent is not connected to the registry"
		default:
			s.Detail += ", though the registry has the import"
			s.Fix = fmt.Sprintf("the agent of %s has not imported it: check that it runs there and read its log", t.Cluster)
		}
		return s
	}
	conds := c.Import.Status.Conditions
	ready := meta.FindStatusCondition(conds, string(mcsv1beta1.ServiceImportConditionReady))
	switch {
	case ready == nil:
		s.Status, s.Detail = Warn, "no Ready condition yet"
		s.Fix = "wait a moment; if it stays, read the agent's log"
		return s
	case ready.Status != metav1.ConditionTrue:
		s.Status, s.Detail = Fail, condText(ready)
		s.Fix = importNotReadyFix(ready.Reason, t)
		return s
	}
	if cf := meta.FindStatusCondition(conds, keys.ConditionConflict); cf != nil && cf.Status == metav1.ConditionTrue {
		s.Status, s.Detail = Warn, "Ready, but "+condText(cf)
		s.Fix = "make the exporting clusters' Services agree on the field the message names"
		return s
	}
	s.Status = OK
	s.Detail = fmt.Sprintf("Ready, %s, ports %s", c.Import.Spec.Type, mcsPorts(c.Import.Spec.Ports))
	if len(c.Import.Spec.IPs) > 0 {
		s.Detail += ", ips " + strings.Join(c.Import.Spec.IPs, ",")
	}
	if registryRead && f.Registry.Import != nil {
		var local []string
		for _, cs := range c.Import.Status.Clusters {
			local = append(local, cs.Cluster)
		}
		sort.Strings(local)
		if want := importClusters(f.Registry.Import); !slices.Equal(local, want) {
			s.Status = Warn
			s.Detail += fmt.Sprintf("; its status lists clusters %v, the registry %v", local, want)
			s.Fix = "the agent is behind the registry: wait a moment; if it stays, read the agent's log"
		}
	}
	return s
}

func importNotReadyFix(reason string, t Target) string {
	switch reason {
	case keys.ReasonBlocked:
		return fmt.Sprintf("a Service or ServiceImport %s/%s in %s is not the agent's: rename or delete it", t.Namespace, t.Name, t.Cluster)
	case keys.ReasonInvalidPorts:
		return "the exporting Services mix named and unnamed ports: name every port"
	case string(mcsv1beta1.ServiceImportReasonIPFamilyNotSupported):
		return fmt.Sprintf("export the service with an IP family that %s's Service network has", t.Cluster)
	}
	return "read the message and the agent's log"
}

func derivedService(f *Facts, c *ClusterFacts) Step {
	s := Step{Name: "derived Service in " + f.Target.Cluster}
	if c.DerivedService == nil {
		s.Status, s.Detail = Fail, fmt.Sprintf("Service %s/%s does not exist", f.Target.Namespace, c.DerivedServiceName)
		s.Fix = "the agent has not made it: see the ServiceImport's Ready condition and the agent's log"
		return s
	}
	svc := c.DerivedService
	if svc.Labels[keys.LabelManagedBy] != keys.ManagedByAgent {
		s.Status, s.Detail = Fail, fmt.Sprintf("Service %s is not the agent's (label %s=%q)", svc.Name, keys.LabelManagedBy, svc.Labels[keys.LabelManagedBy])
		s.Fix = "delete or rename that Service so that the agent can make its own"
		return s
	}
	s.Status, s.Detail = OK, svc.Name
	if c.Import.Spec.Type == mcsv1beta1.Headless {
		s.Detail += ", headless"
		return s
	}
	s.Detail += ", ClusterIP " + strings.Join(svc.Spec.ClusterIPs, ",")
	if !sameSet(svc.Spec.ClusterIPs, c.Import.Spec.IPs) {
		s.Status = Warn
		s.Detail += fmt.Sprintf("; the ServiceImport's ips are %v", c.Import.Spec.IPs)
		s.Fix = "the agent has not copied the ClusterIP yet: wait a moment; if it stays, read the agent's log"
	}
	return s
}

// endpointSlices counts the ready endpoints of each source cluster and
// checks every cluster of the import has slices.
func endpointSlices(f *Facts, c *ClusterFacts) Step {
	s := Step{Name: "EndpointSlices in " + f.Target.Cluster}
	if throughGateway(c) {
		return gatewaySlices(f, c)
	}
	type count struct{ ready, all int }
	counts := map[string]*count{}
	for _, sl := range c.Slices {
		src := sl.Labels[mcsv1beta1.LabelSourceCluster]
		if counts[src] == nil {
			counts[src] = &count{}
		}
		for _, ep := range sl.Endpoints {
			counts[src].all++
			// A nil ready means ready (EndpointConditions' documentation).
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				counts[src].ready++
			}
		}
	}
	sources := sets.KeySet(counts)
	if r := f.Registry; r != nil && r.Err == nil && r.Import != nil {
		sources.Insert(importClusters(r.Import)...)
		// Clusters of other networks are never in the slices (the
		// networks step says why).
		for other := range otherNetworks(f) {
			if counts[other] == nil {
				sources.Delete(other)
			}
		}
	} else {
		for _, cs := range c.Import.Status.Clusters {
			sources.Insert(cs.Cluster)
		}
	}
	var parts, empty []string
	total := 0
	for _, src := range sets.List(sources) {
		n := counts[src]
		if n == nil {
			n = &count{}
		}
		total += n.ready
		parts = append(parts, fmt.Sprintf("%s %d/%d ready", src, n.ready, n.all))
		if n.ready == 0 {
			empty = append(empty, src)
		}
	}
	s.Detail = strings.Join(parts, ", ")
	switch {
	case len(sources) == 0:
		s.Status, s.Detail = Fail, "no imported EndpointSlices"
		s.Fix = "the agent has not imported endpoints: read its log"
	case total == 0:
		s.Status = Fail
		s.Fix = "no exporting cluster has a ready endpoint: check the exported Services' Pods (readiness) in " + strings.Join(empty, ", ")
	case len(empty) > 0:
		s.Status = Warn
		s.Fix = "no ready endpoint from " + strings.Join(empty, ", ") + ": traffic goes to the other clusters; check the Pods there"
	default:
		s.Status = OK
	}
	return s
}

// gatewaySlices checks the slices of an import that goes through the
// cluster's east-west gateway: they name the gateway's endpoints, which
// take every connection (the next step shows where they go).
func gatewaySlices(f *Facts, c *ClusterFacts) Step {
	s := Step{Name: "EndpointSlices in " + f.Target.Cluster}
	ready, all := 0, 0
	ports := map[string]bool{}
	for _, sl := range c.Slices {
		for _, p := range sl.Ports {
			if p.Port != nil {
				ports[fmt.Sprint(*p.Port)] = true
			}
		}
		for _, ep := range sl.Endpoints {
			all++
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				ready++
			}
		}
	}
	s.Detail = fmt.Sprintf("through %s's east-west gateway (%s %s): %d/%d gateway endpoints ready on ports %s",
		f.Target.Cluster, keys.AnnotationEastWestPorts, c.DerivedService.Annotations[keys.AnnotationEastWestPorts], ready, all, strings.Join(sets.List(sets.KeySet(ports)), ","))
	if ready == 0 {
		s.Status = Fail
		s.Fix = "the east-west gateway's Service (the agent's --eastwest-gateway-service) has no ready endpoint: check the gateway's Pods (fleetnet-edge with --eastwest-listen)"
		return s
	}
	s.Status = OK
	return s
}

// clustersetDNS checks fleetnet-dns' answer against the ServiceImport and
// then that the cluster's own resolver forwards the zone to it.
func clustersetDNS(f *Facts) []Step {
	name := "clusterset DNS"
	if f.DNS == nil || (f.DNS.Fleetnet == nil && f.DNS.Cluster == nil) {
		return []Step{{Name: name, Status: Skip, Detail: "not asked",
			Fix: "give --dns HOST:PORT of the cluster's fleetnet-dns (and --cluster-dns of its CoreDNS) to check the name " + serviceName(f.Target)}}
	}
	var want []string
	if c := f.Clusters[f.Target.Cluster]; c != nil && c.Import != nil && c.Import.Spec.Type != mcsv1beta1.Headless {
		want = c.Import.Spec.IPs
	}
	var steps []Step
	if a := f.DNS.Fleetnet; a != nil {
		steps = append(steps, dnsStep("fleetnet-dns", f.DNS.Name, a, want,
			"fleetnet-dns has no record: check that it runs with a kubeconfig of "+f.Target.Cluster+" and may list serviceimports and endpointslices (its log says)"))
	}
	if a := f.DNS.Cluster; a != nil {
		fix := fmt.Sprintf("the cluster's resolver does not forward %s to fleetnet-dns: run fleetnetctl dns wire --context <the cluster>, which adds to its Corefile (kube-system/coredns) a server block for %s that forwards to fleetnet-dns' ClusterIP", keys.ClustersetZone, keys.ClustersetZone)
		steps = append(steps, dnsStep("cluster DNS", f.DNS.Name, a, want, fix))
	}
	return steps
}

func dnsStep(who, qname string, a *DNSAnswer, want []string, missingFix string) Step {
	s := Step{Name: fmt.Sprintf("%s (%s)", who, a.Server)}
	switch {
	case a.Err != nil:
		s.Status, s.Detail = Fail, fmt.Sprintf("no answer for %s: %v", qname, a.Err)
		s.Fix = fmt.Sprintf("check that %s runs and listens at %s", who, a.Server)
	case a.Rcode != dns.RcodeSuccess:
		s.Status, s.Detail = Fail, fmt.Sprintf("%s for %s", dns.RcodeToString[a.Rcode], qname)
		s.Fix = missingFix
	case len(a.Addrs) == 0:
		s.Status, s.Detail = Fail, "no address for "+qname
		s.Fix = missingFix
	case len(want) > 0 && !sameSet(a.Addrs, want):
		s.Status, s.Detail = Fail, fmt.Sprintf("%s answers %v, the ServiceImport's ips are %v", qname, a.Addrs, want)
		s.Fix = "a stale answer: wait for the record's TTL and the resolver's cache; if it stays, restart fleetnet-dns"
	default:
		s.Status, s.Detail = OK, fmt.Sprintf("%s -> %s", qname, strings.Join(a.Addrs, ","))
	}
	return s
}

// serviceName is the service's clusterset DNS name (KEP-1645).
func serviceName(t Target) string {
	return fmt.Sprintf("%s.%s.svc.%s.", t.Name, t.Namespace, keys.ClustersetZone)
}

func clusterLive(r *RegistryFacts, id string) bool {
	return slices.ContainsFunc(r.Clusters, func(c *registryv1.Cluster) bool { return c.GetId() == id && c.GetLive() })
}

func condText(c *metav1.Condition) string {
	s := fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason)
	if c.Message != "" {
		s += ": " + c.Message
	}
	return s
}

func sameSet(a, b []string) bool {
	return sets.New(a...).Equal(sets.New(b...))
}

func ports(ps []*registryv1.ServicePort) string {
	var out []string
	for _, p := range ps {
		out = append(out, portText(p.GetName(), p.GetPort(), p.GetProtocol()))
	}
	return strings.Join(out, ",")
}

func mcsPorts(ps []mcsv1beta1.ServicePort) string {
	var out []string
	for _, p := range ps {
		out = append(out, portText(p.Name, p.Port, string(p.Protocol)))
	}
	return strings.Join(out, ",")
}

func portText(name string, port int32, proto string) string {
	s := fmt.Sprintf("%d/%s", port, proto)
	if name != "" {
		s = name + ":" + s
	}
	return s
}
