package view

import (
	"maps"
	"slices"
	"strings"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
)

// Audience is who receives a watch event: every watcher (the zero value),
// only the named clusters, or every watcher but the named clusters. A
// ServiceExport's fleetnet.dev/export-to scopes its endpoints, and the
// import while only scoped exports make it, to the clusters it names: the
// registry never sends them elsewhere.
type Audience struct {
	scoped   bool
	except   bool
	clusters map[string]bool
}

// Everyone is the audience of an unscoped event.
func Everyone() Audience { return Audience{} }

// Only is the audience of exactly these clusters.
func Only(clusters ...string) Audience {
	a := Audience{scoped: true, clusters: map[string]bool{}}
	for _, c := range clusters {
		a.clusters[c] = true
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

// Minus is the clusters of a that are not in b.
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
	case a.except && b.except:
		// (all but A) minus (all but B) = B \ A
		out := Only()
		for c := range b.clusters {
			if !a.clusters[c] {
				out.clusters[c] = true
			}
		}
		return out
	case a.except:
		// (all but A) minus B = all but (A ∪ B)
		u := maps.Clone(a.clusters)
		maps.Copy(u, b.clusters)
		return allBut(u)
	case b.except:
		// A minus (all but B) = A ∩ B
		out := Only()
		for c := range a.clusters {
			if b.clusters[c] {
				out.clusters[c] = true
			}
		}
		return out
	default:
		out := Only()
		for c := range a.clusters {
			if !b.clusters[c] {
				out.clusters[c] = true
			}
		}
		return out
	}
}

// Equal says whether two audiences include the same clusters.
func (a Audience) Equal(b Audience) bool {
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

// exportAudience is who may see an export's endpoints: its export_to and
// the exporting cluster itself, or everyone when it names none.
func exportAudience(cluster string, e *registryv1.Export) Audience {
	if len(e.GetExportTo()) == 0 {
		return Everyone()
	}
	return Only(append([]string{cluster}, e.GetExportTo()...)...)
}

// union is everyone when one of the audiences is, else the clusters any
// includes. Only the Only and Everyone kinds are united (export audiences).
func union(auds []Audience) Audience {
	out := Only()
	for _, a := range auds {
		if a.IsEveryone() || a.except {
			return Everyone()
		}
		maps.Copy(out.clusters, a.clusters)
	}
	return out
}

// Event is a watch event and who receives it. Retract marks a delete sent
// only because a scope no longer includes its audience: a watcher that
// sees every scope (an administrator's) never gets it.
type Event struct {
	*registryv1.WatchEvent
	Audience Audience
	Retract  bool
}
