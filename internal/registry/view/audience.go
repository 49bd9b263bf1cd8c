package view

import (
	"maps"
	"slices"
	"strings"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/validate"
	"k8s.io/apimachinery/pkg/labels"
)

// Audience is who receives a watch event: every watcher (the zero value),
// only the named clusters, or every watcher but the named clusters. A
// ServiceExport's fleetnet.dev/export-to and fleetnet.dev/export-to-selector
// scope its endpoints, and the import while only scoped exports make it,
// to the clusters it names and those whose properties the selector
// matches: the registry never sends them elsewhere.
type Audience struct {
	scoped   bool
	except   bool
	clusters map[string]bool
}

// Admins is the member of an audience that stands for the administrators'
// watchers (and lists), who see every export: no cluster has an empty id.
// Everyone includes them; Only must name them.
const Admins = ""

// Everyone is the audience of an unscoped event.
func Everyone() Audience { return Audience{} }

// Only is the audience of exactly these clusters.
func Only(clusters ...string) Audience {
	a := Audience{scoped: true}
	if len(clusters) > 0 {
		a.clusters = make(map[string]bool, len(clusters))
		for _, c := range clusters {
			a.clusters[c] = true
		}
	}
	return a
}

func allBut(clusters map[string]bool) Audience {
	return Audience{scoped: true, except: true, clusters: clusters}
}

// Includes says whether cluster's watchers receive the event.
func (a Audience) Includes(cluster string) bool {
	if !a.scoped {
		return true
	}
	return a.clusters[cluster] != a.except
}

// IsEveryone is true for the unscoped audience.
func (a Audience) IsEveryone() bool { return !a.scoped || (a.except && len(a.clusters) == 0) }

// IsEmpty is true when no cluster is included.
func (a Audience) IsEmpty() bool { return a.scoped && !a.except && len(a.clusters) == 0 }

// Minus is the clusters of a that are not in b. The unscoped audiences,
// every event's but a scoped service's, allocate nothing.
func (a Audience) Minus(b Audience) Audience {
	aAll, bAll := a.IsEveryone(), b.IsEveryone()
	switch {
	case bAll:
		return Only()
	case aAll && b.except:
		// everyone minus (everyone but B) = B
		return Only(slices.Collect(maps.Keys(b.clusters))...)
	case aAll:
		return allBut(maps.Clone(b.clusters))
	case a.except && !b.except:
		// (all but A) minus B = all but (A ∪ B)
		u := maps.Clone(a.clusters)
		if u == nil {
			u = map[string]bool{}
		}
		maps.Copy(u, b.clusters)
		return allBut(u)
	case a.except:
		// (all but A) minus (all but B) = B \ A
		return Only(keysWhere(b.clusters, func(c string) bool { return !a.clusters[c] })...)
	case b.except:
		// A minus (all but B) = A ∩ B
		return Only(keysWhere(a.clusters, func(c string) bool { return b.clusters[c] })...)
	default:
		return Only(keysWhere(a.clusters, func(c string) bool { return !b.clusters[c] })...)
	}
}

func keysWhere(m map[string]bool, keep func(string) bool) []string {
	var out []string
	for c := range m {
		if keep(c) {
			out = append(out, c)
		}
	}
	return out
}

// complement is every watcher a does not include.
func (a Audience) complement() Audience { return Everyone().Minus(a) }

// Intersect is the clusters both a and b include.
func (a Audience) Intersect(b Audience) Audience {
	switch {
	case a.IsEveryone():
		return b
	case b.IsEveryone():
		return a
	}
	return a.Minus(b.complement())
}

// Union is the clusters a or b includes.
func (a Audience) Union(b Audience) Audience {
	switch {
	case a.IsEveryone() || b.IsEveryone():
		return Everyone()
	case a.IsEmpty():
		return b
	case b.IsEmpty():
		return a
	}
	u := a.complement().Minus(b).complement()
	if u.IsEveryone() {
		return Everyone()
	}
	return u
}

// Equal says whether two audiences include the same clusters.
func (a Audience) Equal(b Audience) bool {
	if a.IsEveryone() || b.IsEveryone() {
		return a.IsEveryone() == b.IsEveryone()
	}
	return a.Minus(b).IsEmpty() && b.Minus(a).IsEmpty()
}

// String is "everyone", "only a,b" or "all but a,b"; the administrators
// are "(admins)".
func (a Audience) String() string {
	if a.IsEveryone() {
		return "everyone"
	}
	names := slices.Sorted(maps.Keys(a.clusters))
	if len(names) > 0 && names[0] == Admins {
		names = append(names[1:], "(admins)")
	}
	return a.prefix() + strings.Join(names, ",")
}

func (a Audience) prefix() string {
	if a.except {
		return "all but "
	}
	return "only "
}

// scope is who may import one export: the exporting cluster, the clusters
// export_to names, and the registered clusters whose properties its
// export_to_selector matches; nil when the export names neither (every
// cluster).
type scope struct {
	exporter string
	names    []string
	// selector is nil without export_to_selector; one that does not parse
	// (the registry validated it, so only a record written around the
	// registry) matches nothing: a scope withholds rather than leaks.
	selector labels.Selector
}

func newScope(exporter string, e *registryv1.Export) *scope {
	to, sel := e.GetExportTo(), e.GetExportToSelector()
	if len(to) == 0 && sel == "" {
		return nil
	}
	s := &scope{exporter: exporter, names: to}
	if sel != "" {
		parsed, err := validate.Selector(sel)
		if err != nil {
			parsed = labels.Nothing()
		}
		s.selector = parsed
	}
	return s
}

// matches says whether the selector matches these properties.
func (s *scope) matches(properties map[string]string) bool {
	return s != nil && s.selector != nil && s.selector.Matches(labels.Set(properties))
}

// audience is who may see the export's endpoints given the registered
// clusters: everyone for an unscoped export.
func (s *scope) audience(clusters map[string]*registryv1.Cluster) Audience {
	if s == nil {
		return Everyone()
	}
	in := append([]string{s.exporter}, s.names...)
	if s.selector != nil {
		for id, c := range clusters {
			if s.matches(c.GetProperties()) {
				in = append(in, id)
			}
		}
	}
	return Only(in...)
}

// Event is a watch event and who receives it. Retract marks a delete sent
// only because a scope no longer includes its audience while the service
// goes on for others; the audience alone decides who gets it, and it never
// includes the administrators, who see every export.
type Event struct {
	*registryv1.WatchEvent
	Audience Audience
	Retract  bool
}

// StatusAudience is who the registry sends an export to, as the export's
// status tells a reader of every status (an administrator's watch with
// export_status_cluster_id "*"): every cluster when ToEveryCluster, else
// the exporting cluster and the live clusters of ImportedBy. A cluster of
// the scope whose lease expired is not among them until it is live again:
// it is left out, which withholds rather than leaks.
func StatusAudience(st *registryv1.ExportStatus) Audience {
	if st.GetToEveryCluster() {
		return Everyone()
	}
	in := slices.Clone(st.GetImportedBy())
	if c := st.GetKey().GetClusterId(); c != "" {
		in = append(in, c)
	}
	return Only(slices.DeleteFunc(in, func(c string) bool { return c == Admins })...)
}

// SameImport is who the registry sends imp as it is, the merge of every
// export that participates in it: the clusters that every participating
// export's audience includes (statuses by exporting cluster, read with
// StatusAudience). A participating export without a status counts as
// reaching no one. A cluster that some participating export is scoped away
// from is sent the merge of the exports it may see instead (another import,
// or none): it is not in the audience of this one.
func SameImport(imp *registryv1.Import, statuses map[string]*registryv1.ExportStatus) Audience {
	if len(imp.GetClusters()) == 0 {
		return Only()
	}
	aud := Everyone()
	for _, c := range imp.GetClusters() {
		st, ok := statuses[c.GetClusterId()]
		if !ok {
			return Only()
		}
		aud = aud.Intersect(StatusAudience(st))
	}
	return aud
}
