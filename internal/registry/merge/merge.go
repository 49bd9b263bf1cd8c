// Package merge derives an import from the exports of one Service across the
// fleet, per KEP-1645, and renames endpoint ports to the import's names. It
// is pure: plain inputs, plain outputs, no clock, no IO, and the result does
// not depend on the order in which exports arrived.
package merge

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
)

// Conflict reasons, as the registry reports them to exporters.
const (
	ReasonPort                  = "Port"
	ReasonType                  = "Type"
	ReasonSessionAffinity       = "SessionAffinity"
	ReasonSessionAffinityConfig = "SessionAffinityConfig"
	ReasonLabels                = "Labels"
	ReasonAnnotations           = "Annotations"
	ReasonInternalTrafficPolicy = "InternalTrafficPolicy"
	ReasonTrafficDistribution   = "TrafficDistribution"
	ReasonIPFamily              = "IPFamily"
)

// Cluster is what the merge needs to know of an exporting cluster.
type Cluster struct {
	// Live is true while the cluster's lease is held.
	Live   bool
	Region string
	// Network (its network.fleetnet.dev property) and EastWestGateway are
	// copied into the import for importers on other networks.
	Network, EastWestGateway string
}

// Result is the merge of one Service's exports.
type Result struct {
	// Import is nil when no export participates.
	Import *registryv1.Import
	// Statuses has one entry per export, by cluster id.
	Statuses map[string]*registryv1.ExportStatus
}

// Merge derives the import of key from exports (any order; one per
// cluster). Only exports of live clusters participate. The oldest export
// (exportedSince, then cluster id) decides type, session affinity and its
// config, internal traffic policy, traffic distribution and the exported
// labels and annotations; ports are the union (see mergePorts) and IP
// families the union (see mergeIPFamilies).
//
// A property the participating exports disagree on is a conflict of the
// service, not of one export: as KEP-1645 and the mcs-api conformance suite
// read it, every participating export reports it, the oldest included, with
// a message naming the clusters, their values and the value the import uses.
func Merge(key *registryv1.ImportKey, exports []*registryv1.Export, clusters map[string]Cluster) Result {
	res := Result{Statuses: map[string]*registryv1.ExportStatus{}}
	var part []*registryv1.Export
	for _, e := range exports {
		live := clusters[e.GetKey().GetClusterId()].Live
		res.Statuses[e.GetKey().GetClusterId()] = &registryv1.ExportStatus{Key: e.GetKey(), Participating: live}
		if live {
			part = append(part, e)
		}
	}
	if len(part) == 0 {
		return res
	}
	sort.Slice(part, func(i, j int) bool { return older(part[i], part[j]) })
	oldest := part[0]
	imp := &registryv1.Import{
		Key:                           &registryv1.ImportKey{Namespace: key.GetNamespace(), Name: key.GetName()},
		Type:                          oldest.GetType(),
		SessionAffinity:               oldest.GetSessionAffinity(),
		SessionAffinityTimeoutSeconds: oldest.GetSessionAffinityTimeoutSeconds(),
		InternalTrafficPolicy:         oldest.GetInternalTrafficPolicy(),
		TrafficDistribution:           oldest.GetTrafficDistribution(),
		Labels:                        cloneMap(oldest.GetLabels()),
		Annotations:                   cloneMap(oldest.GetAnnotations()),
	}
	var conflicts []*registryv1.Conflict
	// property adds a conflict when the exports' values (as show renders
	// them) differ; the import uses the oldest export's.
	property := func(reason, what string, show func(*registryv1.Export) string) {
		if c := disagreement(part, reason, what, show); c != nil {
			conflicts = append(conflicts, c)
		}
	}
	property(ReasonType, "type", (*registryv1.Export).GetType)
	property(ReasonSessionAffinity, "sessionAffinity", (*registryv1.Export).GetSessionAffinity)
	// The timeout matters only among exports that use ClientIP affinity, and
	// only when the import does; a differing affinity is its own conflict.
	if oldest.GetSessionAffinity() == "ClientIP" {
		clientIP := slices.DeleteFunc(slices.Clone(part), func(e *registryv1.Export) bool { return e.GetSessionAffinity() != "ClientIP" })
		if c := disagreement(clientIP, ReasonSessionAffinityConfig, "sessionAffinityConfig.clientIP.timeoutSeconds", func(e *registryv1.Export) string {
			return strconv.Itoa(int(e.GetSessionAffinityTimeoutSeconds()))
		}); c != nil {
			conflicts = append(conflicts, c)
		}
	}
	property(ReasonInternalTrafficPolicy, "internalTrafficPolicy", (*registryv1.Export).GetInternalTrafficPolicy)
	property(ReasonTrafficDistribution, "trafficDistribution", (*registryv1.Export).GetTrafficDistribution)
	var portConflict *registryv1.Conflict
	imp.Ports, portConflict = mergePorts(part)
	if portConflict != nil {
		conflicts = append(conflicts, portConflict)
	}
	var familyConflict *registryv1.Conflict
	imp.IpFamilies, familyConflict = mergeIPFamilies(part)
	if familyConflict != nil {
		conflicts = append(conflicts, familyConflict)
	}
	for _, m := range []struct {
		reason, what string
		get          func(*registryv1.Export) map[string]string
	}{
		{ReasonLabels, "exportedLabels", (*registryv1.Export).GetLabels},
		{ReasonAnnotations, "exportedAnnotations", (*registryv1.Export).GetAnnotations},
	} {
		if c := disagreementBy(part, m.reason, m.what, func(e *registryv1.Export) string { return describeMap(m.get(e)) },
			func(a, b *registryv1.Export) bool { return maps.Equal(m.get(a), m.get(b)) }); c != nil {
			conflicts = append(conflicts, c)
		}
	}
	for _, e := range part {
		id := e.GetKey().GetClusterId()
		c := clusters[id]
		imp.Clusters = append(imp.Clusters, &registryv1.ImportCluster{ClusterId: id, Region: c.Region, Weight: e.GetWeight(), RegionalFrontend: e.GetRegionalFrontend(),
			PrivateLinkService: e.GetPrivateLinkService(), PrivateLinkAutoApproval: e.GetPrivateLinkAutoApproval(),
			Network: c.Network, EastwestGateway: c.EastWestGateway})
		if len(conflicts) > 0 {
			res.Statuses[id].Conflicts = conflicts
		}
	}
	sort.Slice(imp.Clusters, func(i, j int) bool { return imp.Clusters[i].ClusterId < imp.Clusters[j].ClusterId })
	imp.Conflicts = conflicts
	res.Import = imp
	return res
}

// maxClustersNamed bounds how many clusters a conflict message lists per
// value, so that a fleet of hundreds keeps its conditions readable.
const maxClustersNamed = 5

// disagreement returns the conflict of a property whose values differ
// among the exports (oldest first), or nil when they agree. The message
// lists every value with its clusters, the import's (the oldest export's)
// first.
func disagreement(part []*registryv1.Export, reason, what string, show func(*registryv1.Export) string) *registryv1.Conflict {
	return disagreementBy(part, reason, what, show, nil)
}

// disagreementBy is disagreement with an equality of its own, so that the
// common case (every export agrees) renders nothing: the merge runs on every
// change of an export or a lease, for every exporter of the service.
func disagreementBy(part []*registryv1.Export, reason, what string, show func(*registryv1.Export) string, equal func(a, b *registryv1.Export) bool) *registryv1.Conflict {
	if equal != nil && !slices.ContainsFunc(part[1:], func(e *registryv1.Export) bool { return !equal(part[0], e) }) {
		return nil
	}
	var values []string
	byValue := map[string][]string{}
	var reps []*registryv1.Export // with equal: one export per value, rendered once
	for _, e := range part {
		var v string
		if equal == nil {
			v = show(e)
		} else if i := slices.IndexFunc(reps, func(r *registryv1.Export) bool { return equal(r, e) }); i >= 0 {
			v = values[i]
		} else {
			v = show(e)
			reps = append(reps, e)
		}
		if _, ok := byValue[v]; !ok {
			values = append(values, v)
		}
		byValue[v] = append(byValue[v], e.GetKey().GetClusterId())
	}
	if len(values) < 2 {
		return nil
	}
	parts := make([]string, 0, len(values))
	for _, v := range values {
		parts = append(parts, fmt.Sprintf("%s in %s", quoteEmpty(v), clusterList(byValue[v])))
	}
	verb := "differs"
	if strings.HasSuffix(what, "s") {
		verb = "differ" // ports, exportedLabels, ...
	}
	return &registryv1.Conflict{Reason: reason, Message: fmt.Sprintf("%s %s: %s; the import uses %s of cluster %s, the oldest export",
		what, verb, strings.Join(parts, ", "), quoteEmpty(values[0]), part[0].GetKey().GetClusterId())}
}

func quoteEmpty(v string) string {
	if v == "" {
		return `""`
	}
	return v
}

// clusterList names clusters, sorted, at most maxClustersNamed of them.
func clusterList(ids []string) string {
	ids = slices.Sorted(slices.Values(ids))
	if len(ids) > maxClustersNamed {
		return fmt.Sprintf("%s and %d more", strings.Join(ids[:maxClustersNamed], ", "), len(ids)-maxClustersNamed)
	}
	return strings.Join(ids, ", ")
}

func cloneMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

// describeMap renders labels or annotations as {k=v, ...}, sorted; equal
// maps render equally.
func describeMap(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// older orders exports by exportedSince, then cluster id.
func older(a, b *registryv1.Export) bool {
	ta, tb := a.GetExportedSince().AsTime(), b.GetExportedSince().AsTime()
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return a.GetKey().GetClusterId() < b.GetKey().GetClusterId()
}

type portKey struct {
	port     int32
	protocol string
}

func keyOf(p *registryv1.ServicePort) portKey { return portKey{p.GetPort(), p.GetProtocol()} }

// mergePorts returns the union of ports by (port, protocol), oldest export
// first, and a Port conflict when the exports' port lists differ in any way
// (even when the union is clean: each export then serves only part of the
// import). A port that a newer export defines differently (name or
// appProtocol of the same port and protocol), or whose name an older export
// gives to another port, is left out: the oldest definition wins. A union
// that mixes unnamed and named ports could not be a valid Service: then the
// oldest export's ports are kept whole.
func mergePorts(part []*registryv1.Export) ([]*registryv1.ServicePort, *registryv1.Conflict) {
	oldest := part[0]
	chosen := map[portKey]*registryv1.ServicePort{}
	owner := map[portKey]string{}
	byName := map[string]portKey{}
	var order []portKey
	var leftOut []string
	for _, e := range part {
		id := e.GetKey().GetClusterId()
		for _, p := range e.GetPorts() {
			k := keyOf(p)
			if c, ok := chosen[k]; ok {
				if c.GetName() != p.GetName() || c.GetAppProtocol() != p.GetAppProtocol() {
					leftOut = append(leftOut, fmt.Sprintf("%s of cluster %s (cluster %s defines %s)", describePort(p), id, owner[k], describePort(c)))
				}
				continue
			}
			if other, ok := byName[p.GetName()]; ok && p.GetName() != "" {
				leftOut = append(leftOut, fmt.Sprintf("%s of cluster %s (cluster %s names %d/%s %q)", describePort(p), id, owner[other], other.port, other.protocol, p.GetName()))
				continue
			}
			chosen[k] = &registryv1.ServicePort{Name: p.GetName(), Protocol: p.GetProtocol(), Port: p.GetPort(), AppProtocol: p.GetAppProtocol()}
			owner[k] = id
			if p.GetName() != "" {
				byName[p.GetName()] = k
			}
			order = append(order, k)
		}
	}
	out := make([]*registryv1.ServicePort, 0, len(order))
	for _, k := range order {
		out = append(out, chosen[k])
	}
	sortPorts(out)
	kept := ""
	if len(out) > 1 && slices.ContainsFunc(out, func(p *registryv1.ServicePort) bool { return p.GetName() == "" }) {
		out = clonePorts(oldest.GetPorts())
		kept = fmt.Sprintf("; the union would mix unnamed and named ports, so the import keeps the ports of cluster %s, the oldest export", oldest.GetKey().GetClusterId())
		leftOut = nil
	}
	c := disagreementBy(part, ReasonPort, "ports", func(e *registryv1.Export) string { return describePorts(e.GetPorts()) },
		func(a, b *registryv1.Export) bool { return samePorts(a.GetPorts(), b.GetPorts()) })
	if c == nil {
		return out, nil
	}
	// The generic message says the import uses the oldest export's ports;
	// say what it really has.
	msg := c.GetMessage()
	msg = msg[:strings.LastIndex(msg, "; the import uses ")]
	msg += "; the import has " + describePorts(out) + kept
	if len(leftOut) > 0 {
		msg += "; left out: " + strings.Join(leftOut, ", ")
	}
	c.Message = msg
	return out, c
}

// samePorts reports whether two port lists hold the same ports, in any
// order; without allocating when they are in the same order, as the
// exports of one Service usually are.
func samePorts(a, b []*registryv1.ServicePort) bool {
	if len(a) != len(b) {
		return false
	}
	inOrder := true
	for i := range a {
		if !samePort(a[i], b[i]) {
			inOrder = false
			break
		}
	}
	return inOrder || describePorts(a) == describePorts(b)
}

func samePort(a, b *registryv1.ServicePort) bool {
	return a.GetPort() == b.GetPort() && a.GetProtocol() == b.GetProtocol() && a.GetName() == b.GetName() && a.GetAppProtocol() == b.GetAppProtocol()
}

func sortPorts(ps []*registryv1.ServicePort) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].GetPort() != ps[j].GetPort() {
			return ps[i].GetPort() < ps[j].GetPort()
		}
		return ps[i].GetProtocol() < ps[j].GetProtocol()
	})
}

func clonePorts(ps []*registryv1.ServicePort) []*registryv1.ServicePort {
	out := make([]*registryv1.ServicePort, 0, len(ps))
	for _, p := range ps {
		out = append(out, &registryv1.ServicePort{Name: p.GetName(), Protocol: p.GetProtocol(), Port: p.GetPort(), AppProtocol: p.GetAppProtocol()})
	}
	sortPorts(out)
	return out
}

// describePorts renders a port list sorted by (port, protocol), so equal
// sets render equally whatever their order.
func describePorts(ps []*registryv1.ServicePort) string {
	sorted := clonePorts(ps)
	parts := make([]string, 0, len(sorted))
	for _, p := range sorted {
		parts = append(parts, describePort(p))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func describePort(p *registryv1.ServicePort) string {
	name := p.GetName()
	if name == "" {
		name = "(unnamed)"
	}
	s := fmt.Sprintf("%s %d/%s", name, p.GetPort(), p.GetProtocol())
	if p.GetAppProtocol() != "" {
		s += " appProtocol " + p.GetAppProtocol()
	}
	return s
}

// mergeIPFamilies returns the union of families, the oldest export's first.
// Clusters of different stacks are normal in a fleet (an IPv4 cluster beside
// a dual-stack one) and each importer keeps the families it has, so a
// differing set is not a conflict; an export that shares no family with
// the oldest export is, since its endpoints cannot back the import's
// primary family.
func mergeIPFamilies(part []*registryv1.Export) ([]string, *registryv1.Conflict) {
	oldest := part[0]
	out := slices.Clone(oldest.GetIpFamilies())
	disjoint := false
	for _, e := range part[1:] {
		shared := false
		for _, f := range e.GetIpFamilies() {
			if slices.Contains(oldest.GetIpFamilies(), f) {
				shared = true
			}
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
		if !shared && len(e.GetIpFamilies()) > 0 && len(oldest.GetIpFamilies()) > 0 {
			disjoint = true
		}
	}
	if !disjoint {
		return out, nil
	}
	c := disagreement(part, ReasonIPFamily, "ipFamilies", func(e *registryv1.Export) string { return fmt.Sprint(e.GetIpFamilies()) })
	msg := strings.Replace(c.GetMessage(), "ipFamilies differ:", "ipFamilies share no family:", 1)
	c.Message = fmt.Sprintf("%s; the import has %v, the primary family of cluster %s, the oldest export", msg[:strings.LastIndex(msg, "; the import uses ")], out, oldest.GetKey().GetClusterId())
	return out, c
}
