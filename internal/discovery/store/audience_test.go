package store

import (
	"testing"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/internal/registry/view"
)

// TestAudience: a pool is shown to the clusters of its audience (the
// intersection of its contributions'), and to viewers of every pool; a
// change of the audience alone is a change of the pool, with an event
// that carries it, and the same audience again is none.
func TestAudience(t *testing.T) {
	st := New(Options{Base: base})
	p := pool("demo", "s", nil, cluster("a", "r", ep("a/1", true, "10.0.0.1")))
	k := KeyOf(&p)
	w, _ := st.Watch(st.Revision())
	t.Cleanup(w.Stop)
	next := func() *Event {
		t.Helper()
		select {
		case e := <-w.C():
			return e
		default:
			return nil
		}
	}
	steps := []struct {
		name  string
		do    func()
		event string // the audience of the event the step makes; "" for none
		sees  map[string]bool
	}{
		{"scoped to hub", func() { st.ReplaceScoped("registry", p, view.Only("a", "hub")) }, "only a,hub",
			map[string]bool{"a": true, "hub": true, "b": false, "": false}},
		{"the same again", func() { st.ReplaceScoped("registry", p, view.Only("hub", "a")) }, "", nil},
		{"widened to b", func() { st.ReplaceScoped("registry", p, view.Only("a", "hub", "b")) }, "only a,b,hub",
			map[string]bool{"b": true}},
		{"another source's contribution to hub alone: the intersection", func() { st.ReplaceScoped("other", p, view.Only("hub")) }, "only hub",
			map[string]bool{"a": false, "b": false, "hub": true}},
		{"that one withdrawn", func() { st.Delete("other", k) }, "only a,b,hub", map[string]bool{"b": true}},
		{"to every cluster", func() { st.Replace("registry", p) }, "everyone", map[string]bool{"b": true, "c": true, "": false}},
	}
	for _, s := range steps {
		s.do()
		e := next()
		switch {
		case s.event == "" && e != nil:
			t.Errorf("%s: event %s of audience %s, want none", s.name, e.Type, e.Audience)
		case s.event != "" && (e == nil || e.Type != discoveryv1.EventUpsert || e.Audience.String() != s.event):
			t.Errorf("%s: event %+v, want an upsert to %s", s.name, e, s.event)
		}
		for c, want := range s.sees {
			if _, ok := st.GetFor(ClusterViewer(c), k); ok != want {
				t.Errorf("%s: cluster %q sees the pool: %v, want %v", s.name, c, ok, want)
			}
			if _, list := st.ListFor(ClusterViewer(c), nil); (len(list) == 1) != want {
				t.Errorf("%s: cluster %q lists %d pools, want it %v", s.name, c, len(list), want)
			}
		}
		if _, ok := st.GetFor(EveryPool(), k); !ok {
			t.Errorf("%s: a viewer of every pool does not see it", s.name)
		}
		if _, ok := st.GetFor(Viewer{}, k); ok {
			t.Errorf("%s: the zero viewer sees it", s.name)
		}
	}
	// A snapshot carries the audience too.
	w0, initial := st.Watch(0)
	w0.Stop()
	if e := initial[0]; e.Type != discoveryv1.EventSnapshot || !e.Audience.IsEveryone() {
		t.Errorf("snapshot %s to %s, want everyone", e.Type, e.Audience)
	}
}
