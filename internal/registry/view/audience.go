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

// Equal says whether two audiences include the same clusters.
func (a Audience) Equal(b Audience) bool {
	if a.IsEveryone() || b.IsEveryone() {
		return a.IsEveryone() == b.IsEveryone()
	}
	return a.Minus(b).IsEmpty() && b.Minus(a).IsEmpty()
}

// String is "everyone", "only a,b" or "all but a,b".
func (a Audience) String() string {
	if a.IsEveryone() {
		return "everyone"
	}
	names := strings.Join(slices.Sorted(maps.Keys(a.clusters)), ",")
	if a.except {
		return "all but " + names
	}
	return "only " + names
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

// union is everyone when one of the audiences is, else the clusters any
// includes. Only the Only and Everyone kinds are united (export audiences).
func union(auds []Audience) Audience {
	var names []string
	for _, a := range auds {
		if a.IsEveryone() || a.except {
			return Everyone()
		}
		for c := range a.clusters {
			names = append(names, c)
		}
	}
	return Only(names...)
}

// Event is a watch event and who receives it. Retract marks a delete sent
// only because a scope no longer includes its audience: a watcher that
// sees every scope (an administrator's) never gets it.
type Event struct {
	*registryv1.WatchEvent
	Audience Audience
	Retract  bool
}
