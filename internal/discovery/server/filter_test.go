package server

import (
	"testing"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
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
			f := newWatchFilter("demo", sel, tt.resumed)
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
	if newWatchFilter("", labels.Everything(), true) != nil {
		t.Error("no filter should be nil (everything passes)")
	}
}
