package server

import (
	"testing"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
	"github.com/fleetnet/fleetnet/internal/registry/view"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"
)

func TestWatchFilterApply(t *testing.T) {
	ev := func(typ discoveryv1.EventType, ns, name, app string) *store.Event {
		p := &discoveryv1.Pool{Namespace: ns, Name: name}
		if app != "" {
			p.Labels = map[string]string{"app": app}
		}
		return &store.Event{Event: discoveryv1.Event{Type: typ, Pool: p}}
	}
	show := func(e *store.Event) string {
		if e == nil {
			return "-"
		}
		return string(e.Type) + " " + e.Pool.Namespace + "/" + e.Pool.Name
	}
	sel := labels.SelectorFromSet(labels.Set{"app": "echo"})
	tests := []struct {
		name    string
		resumed bool
		events  []*store.Event
		want    []string
	}{
		{"a fresh watch sends what matches, and a delete when a pool stops matching", false, []*store.Event{
			ev("snapshot", "demo", "a", "echo"), ev("snapshot", "demo", "b", "other"),
			ev("upsert", "demo", "b", "other"), ev("upsert", "demo", "a", "other"), ev("upsert", "demo", "a", "other"), ev("delete", "demo", "a", ""),
			ev("upsert", "demo", "c", "echo"), ev("delete", "demo", "c", ""),
		}, []string{"snapshot demo/a", "-", "-", "delete demo/a", "-", "-", "upsert demo/c", "delete demo/c"}},
		{"a resumed watch deletes, once, what the client may hold", true, []*store.Event{
			ev("upsert", "demo", "b", "other"), ev("upsert", "demo", "b", "other"), ev("delete", "demo", "d", ""), ev("delete", "demo", "d", ""),
			ev("upsert", "other", "x", "other"), ev("delete", "other", "y", ""),
		}, []string{"delete demo/b", "-", "delete demo/d", "-", "-", "-"}},
		{"a reset starts afresh", true, []*store.Event{
			{Event: discoveryv1.Event{Type: discoveryv1.EventReset}}, ev("snapshot", "demo", "b", "other"), ev("upsert", "demo", "b", "other"),
		}, []string{"reset", "-", "-"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newWatchFilter(store.EveryPool(), "demo", sel, tt.resumed)
			var got []string
			for _, e := range tt.events {
				out := f.apply(e)
				if out != nil && out.Pool == nil {
					got = append(got, string(out.Type))
					continue
				}
				got = append(got, show(out))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if newWatchFilter(store.EveryPool(), "", labels.Everything(), true) != nil {
		t.Error("no filter should be nil (everything passes)")
	}
}

// TestWatchFilterFollowsTheAudience: a cluster's watch is sent the pools
// whose audience includes it; a pool that enters its audience is an
// upsert, one that leaves it a delete, and one it never saw is never
// named, not even by a delete.
func TestWatchFilterFollowsTheAudience(t *testing.T) {
	ev := func(typ discoveryv1.EventType, name string, aud store.Audience) *store.Event {
		return &store.Event{Event: discoveryv1.Event{Type: typ, Pool: &discoveryv1.Pool{Namespace: "demo", Name: name}}, Audience: aud}
	}
	show := func(e *store.Event) string {
		if e == nil {
			return "-"
		}
		return string(e.Type) + " " + e.Pool.Name
	}
	hub, everyone := view.Only("a", "hub"), view.Everyone()
	tests := []struct {
		name   string
		viewer store.Viewer
		events []*store.Event
		want   []string
	}{
		{"b: a pool scoped away is never named", store.ClusterViewer("b"), []*store.Event{
			ev("snapshot", "s", hub), ev("snapshot", "o", everyone), ev("upsert", "s", hub), ev("delete", "s", view.Everyone()),
		}, []string{"-", "snapshot o", "-", "-"}},
		{"b: a pool entering and leaving the scope", store.ClusterViewer("b"), []*store.Event{
			ev("upsert", "s", hub), ev("upsert", "s", view.Only("a", "hub", "b")), ev("upsert", "s", hub), ev("upsert", "s", hub),
		}, []string{"-", "upsert s", "delete s", "-"}},
		{"hub sees it", store.ClusterViewer("hub"), []*store.Event{ev("snapshot", "s", hub), ev("upsert", "s", hub)}, []string{"snapshot s", "upsert s"}},
		{"a viewer of every pool sees it", store.EveryPool(), []*store.Event{ev("snapshot", "s", hub)}, []string{"snapshot s"}},
		{"a cluster without a name sees nothing", store.ClusterViewer(""), []*store.Event{ev("snapshot", "o", everyone)}, []string{"-"}},
		{"the zero viewer sees nothing", store.Viewer{}, []*store.Event{ev("snapshot", "o", everyone)}, []string{"-"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newWatchFilter(tt.viewer, "", labels.Everything(), false)
			var got []string
			for _, e := range tt.events {
				got = append(got, show(f.apply(e)))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
