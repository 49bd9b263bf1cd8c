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
// config, internal traffic policy and traffic distribution; every other
// export that differs gets a conflict with the reason.
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
	}
	conflicts := map[string][]*registryv1.Conflict{}
	addConflict := func(e *registryv1.Export, reason, format string, args ...any) {
		id := e.GetKey().GetClusterId()
		conflicts[id] = append(conflicts[id], &registryv1.Conflict{Reason: reason, Message: fmt.Sprintf(format, args...)})
	}
	oldestID := oldest.GetKey().GetClusterId()
	for _, e := range part[1:] {
		if e.GetType() != oldest.GetType() {
			addConflict(e, ReasonType, "type %s differs from %s of cluster %s, the oldest export", e.GetType(), oldest.GetType(), oldestID)
		}
		if e.GetSessionAffinity() != oldest.GetSessionAffinity() {
			addConflict(e, ReasonSessionAffinity, "sessionAffinity %s differs from %s of cluster %s, the oldest export", e.GetSessionAffinity(), oldest.GetSessionAffinity(), oldestID)
		} else if e.GetSessionAffinityTimeoutSeconds() != oldest.GetSessionAffinityTimeoutSeconds() {
			addConflict(e, ReasonSessionAffinityConfig, "sessionAffinityConfig timeout %ds differs from %ds of cluster %s, the oldest export", e.GetSessionAffinityTimeoutSeconds(), oldest.GetSessionAffinityTimeoutSeconds(), oldestID)
		}
		if e.GetInternalTrafficPolicy() != oldest.GetInternalTrafficPolicy() {
			addConflict(e, ReasonInternalTrafficPolicy, "internalTrafficPolicy %q differs from %q of cluster %s, the oldest export", e.GetInternalTrafficPolicy(), oldest.GetInternalTrafficPolicy(), oldestID)
		}
		if e.GetTrafficDistribution() != oldest.GetTrafficDistribution() {
			addConflict(e, ReasonTrafficDistribution, "trafficDistribution %q differs from %q of cluster %s, the oldest export", e.GetTrafficDistribution(), oldest.GetTrafficDistribution(), oldestID)
		}
	}
	imp.Ports = mergePorts(part, addConflict)
	imp.IpFamilies = mergeIPFamilies(part, addConflict)
	imp.Labels = mergeMap(part, (*registryv1.Export).GetLabels, ReasonLabels, "label", addConflict)
	imp.Annotations = mergeMap(part, (*registryv1.Export).GetAnnotations, ReasonAnnotations, "annotation", addConflict)
	for _, e := range part {
		id := e.GetKey().GetClusterId()
		imp.Clusters = append(imp.Clusters, &registryv1.ImportCluster{ClusterId: id, Region: clusters[id].Region, Weight: e.GetWeight()})
	}
	sort.Slice(imp.Clusters, func(i, j int) bool { return imp.Clusters[i].ClusterId < imp.Clusters[j].ClusterId })
	for _, id := range slices.Sorted(maps.Keys(conflicts)) {
		res.Statuses[id].Conflicts = conflicts[id]
		for _, c := range conflicts[id] {
			imp.Conflicts = append(imp.Conflicts, &registryv1.ClusterConflict{ClusterId: id, Conflict: c})
		}
	}
	res.Import = imp
	return res
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

// mergePorts returns the union of ports by (port, protocol), named as in the
// oldest export that has them. A union that mixes unnamed and named ports
// could not be a valid Service: then the oldest export's ports are kept whole
// and every export whose ports differ from them is in conflict.
func mergePorts(part []*registryv1.Export, addConflict func(*registryv1.Export, string, string, ...any)) []*registryv1.ServicePort {
	oldest := part[0]
	chosen := map[portKey]*registryv1.ServicePort{}
	owner := map[portKey]string{}
	var order []portKey
	for _, e := range part {
		for _, p := range e.GetPorts() {
			k := keyOf(p)
			if c, ok := chosen[k]; ok {
				if c.GetName() != p.GetName() || c.GetAppProtocol() != p.GetAppProtocol() {
					addConflict(e, ReasonPort, "port %d/%s is named %q (appProtocol %q) here but %q (appProtocol %q) in cluster %s; the import uses %q",
						p.GetPort(), p.GetProtocol(), p.GetName(), p.GetAppProtocol(), c.GetName(), c.GetAppProtocol(), owner[k], c.GetName())
				}
				continue
			}
			chosen[k] = &registryv1.ServicePort{Name: p.GetName(), Protocol: p.GetProtocol(), Port: p.GetPort(), AppProtocol: p.GetAppProtocol()}
			owner[k] = e.GetKey().GetClusterId()
			order = append(order, k)
		}
	}
	if len(order) > 1 {
		unnamed := false
		for _, k := range order {
			if chosen[k].GetName() == "" {
				unnamed = true
			}
		}
		if unnamed {
			keep := oldest.GetPorts()
			for _, e := range part[1:] {
				if !samePorts(e.GetPorts(), keep) {
					addConflict(e, ReasonPort, "ports %s and %s of cluster %s, the oldest export, would mix unnamed and named ports; the import keeps the oldest export's ports",
						describePorts(e.GetPorts()), describePorts(keep), oldest.GetKey().GetClusterId())
				}
			}
			return clonePorts(keep)
		}
	}
	out := make([]*registryv1.ServicePort, 0, len(order))
	for _, k := range order {
		out = append(out, chosen[k])
	}
	sortPorts(out)
	return out
}

func samePorts(a, b []*registryv1.ServicePort) bool {
	if len(a) != len(b) {
		return false
	}
	ka, kb := clonePorts(a), clonePorts(b)
	sortPorts(ka)
	sortPorts(kb)
	for i := range ka {
		if keyOf(ka[i]) != keyOf(kb[i]) || ka[i].GetName() != kb[i].GetName() || ka[i].GetAppProtocol() != kb[i].GetAppProtocol() {
			return false
		}
	}
	return true
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

func describePorts(ps []*registryv1.ServicePort) string {
	parts := make([]string, 0, len(ps))
	for _, p := range ps {
		name := p.GetName()
		if name == "" {
			name = "(unnamed)"
		}
		parts = append(parts, fmt.Sprintf("%s %d/%s", name, p.GetPort(), p.GetProtocol()))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// mergeIPFamilies returns the union of families, the oldest export's first.
// An export that shares no family with the oldest export is in conflict: its
// endpoints cannot back the import's primary family.
func mergeIPFamilies(part []*registryv1.Export, addConflict func(*registryv1.Export, string, string, ...any)) []string {
	oldest := part[0]
	out := slices.Clone(oldest.GetIpFamilies())
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
			addConflict(e, ReasonIPFamily, "IP families %v share none with %v of cluster %s, the oldest export", e.GetIpFamilies(), oldest.GetIpFamilies(), oldest.GetKey().GetClusterId())
		}
	}
	return out
}

// mergeMap returns the union of exported labels or annotations; for a key
// that exports disagree on, the oldest export's value wins and the others
// are in conflict.
func mergeMap(part []*registryv1.Export, get func(*registryv1.Export) map[string]string, reason, what string, addConflict func(*registryv1.Export, string, string, ...any)) map[string]string {
	out := map[string]string{}
	owner := map[string]string{}
	for _, e := range part {
		m := get(e)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			v := m[k]
			if cur, ok := out[k]; ok {
				if cur != v {
					addConflict(e, reason, "%s %s=%q differs from %q of cluster %s", what, k, v, cur, owner[k])
				}
				continue
			}
			out[k], owner[k] = v, e.GetKey().GetClusterId()
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
