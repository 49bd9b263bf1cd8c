package view

import (
	"slices"
	"strings"
	"testing"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/keyspace"
	"github.com/fleetnet/fleetnet/internal/registry/store"
)

// TestSameImportIsWhatTheRegistrySends: SameImport, read from the
// administrators' import and every export's status (what an
// administrator's watch receives), includes a live cluster exactly when
// the registry sends that cluster an import of the same content, and
// never a cluster it sends another import or none: the rule that
// fleetnet-discovery applies to its callers is the registry's own.
func TestSameImportIsWhatTheRegistrySends(t *testing.T) {
	clusters := []string{"a", "b", "c", "d"}
	tests := []struct {
		name    string
		props   map[string][]string // cluster properties
		dead    []string            // clusters without a live lease
		exports []*registryv1.Export
		want    string // the clusters SameImport includes
	}{
		{"one export to every cluster", nil, nil, []*registryv1.Export{exp("a", 0, "http")}, "a,b,c,d"},
		{"one export to b", nil, nil, []*registryv1.Export{scoped(exp("a", 0, "http"), "b")}, "a,b"},
		{"to its own cluster alone", nil, nil, []*registryv1.Export{scoped(exp("a", 0, "http"), "a")}, "a"},
		{"a's to b and c's to every cluster: the others are sent c's alone", nil, nil,
			[]*registryv1.Export{scoped(exp("a", 0, "http"), "b"), exp("c", 1, "http")}, "a,b"},
		{"two scopes: their intersection", nil, nil,
			[]*registryv1.Export{scoped(exp("a", 0, "http"), "b", "c"), scoped(exp("b", 1, "http"), "a", "c", "d")}, "a,b,c"},
		{"by selector", map[string][]string{"b": {"env", "prod"}, "d": {"env", "prod"}}, nil,
			[]*registryv1.Export{selected(exp("a", 0, "http"), "env=prod")}, "a,b,d"},
		{"a dead exporter's scope changes nothing sent", nil, []string{"c"},
			[]*registryv1.Export{exp("a", 0, "http"), scoped(exp("c", 1, "http"), "c")}, "a,b,c,d"},
		{"a scoped cluster whose lease expired is withheld", nil, []string{"b"},
			[]*registryv1.Export{scoped(exp("a", 0, "http"), "b")}, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &log{data: map[string]store.KV{}}
			v := New()
			apply := func(ev store.Event) {
				t.Helper()
				if _, err := v.Apply([]store.Event{ev}); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range clusters {
				apply(l.put(t, keyspace.ClusterKey(id), clusterWith(id, tt.props[id]...)))
				if !slices.Contains(tt.dead, id) {
					apply(l.put(t, keyspace.LiveKey(id), nil))
				}
			}
			for _, e := range tt.exports {
				apply(l.put(t, keyspace.ExportKey(e.GetKey()), e))
			}
			all := v.Imports()
			if len(all) != 1 {
				t.Fatalf("%d imports, want 1", len(all))
			}
			statuses := map[string]*registryv1.ExportStatus{}
			for _, st := range v.ExportStatuses("*") {
				statuses[st.GetKey().GetClusterId()] = st
			}
			aud := SameImport(all[0], statuses)
			var got []string
			for _, c := range clusters {
				sent := v.ImportsFor(c)
				same := len(sent) == 1 && registryv1.EqualIgnoringTrace(sent[0], all[0])
				in := aud.Includes(c)
				if in {
					got = append(got, c)
				}
				switch {
				case in && !same:
					t.Errorf("SameImport includes %s, which the registry sends %v", c, sent)
				case !in && same && !slices.Contains(tt.dead, c):
					t.Errorf("SameImport leaves out %s, which is live and sent the same import", c)
				}
			}
			if strings.Join(got, ",") != tt.want {
				t.Errorf("SameImport includes %v, want %s", got, tt.want)
			}
		})
	}

	t.Run("a status without to_every_cluster (an older registry's) withholds", func(t *testing.T) {
		imp := &registryv1.Import{Clusters: []*registryv1.ImportCluster{{ClusterId: "a"}}}
		st := &registryv1.ExportStatus{Key: &registryv1.ExportKey{ClusterId: "a"}}
		if aud := SameImport(imp, map[string]*registryv1.ExportStatus{"a": st}); aud.Includes("b") || !aud.Includes("a") {
			t.Errorf("audience %s, want only a", aud)
		}
		if aud := SameImport(imp, nil); !aud.IsEmpty() {
			t.Errorf("without the exporter's status: %s, want no one", aud)
		}
	})
}
