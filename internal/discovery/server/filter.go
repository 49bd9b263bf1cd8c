package server

import (
	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
	"k8s.io/apimachinery/pkg/labels"
)

// watchFilter narrows one watch to the pools its caller may see (a
// cluster: those whose audience includes it), a namespace and a label
// selector. The store's events are for every pool; a pool whose labels or
// audience change can move in or out of the selection, and then the client
// must be told to drop it.
// The filter tracks which pools the client holds; on a resumed connection
// it cannot know what the client got before, so the first change of a pool
// that does not match sends a delete in case the client holds it (a delete
// of a pool the client does not hold is harmless). A cluster's watch never
// resumes (Server.watch starts it afresh): such a delete would name a pool
// scoped away from it.
type watchFilter struct {
	viewer    store.Viewer
	namespace string
	selector  labels.Selector
	// resumed: pools not in held may be held by the client.
	resumed bool
	held    map[store.Key]bool
}

func newWatchFilter(viewer store.Viewer, namespace string, selector labels.Selector, resumed bool) *watchFilter {
	if viewer.EveryPool() && namespace == "" && (selector == nil || selector.Empty()) {
		return nil
	}
	if selector == nil {
		selector = labels.Everything()
	}
	return &watchFilter{viewer: viewer, namespace: namespace, selector: selector, resumed: resumed, held: map[store.Key]bool{}}
}

// matches says whether the client is sent a snapshot or upsert event.
func (f *watchFilter) matches(e *store.Event) bool {
	p := e.Pool
	return f.viewer.Sees(e.Audience) && (f.namespace == "" || p.Namespace == f.namespace) && f.selector.Matches(labels.Set(p.Labels))
}

// apply returns what to send the client for e: e itself, a delete made for
// this client, or nil. A nil filter sends everything.
func (f *watchFilter) apply(e *store.Event) *store.Event {
	if f == nil {
		return e
	}
	switch e.Type {
	case discoveryv1.EventReset:
		// The client drops everything; what follows is a snapshot.
		f.resumed = false
		clear(f.held)
		return e
	case discoveryv1.EventSnapshot:
		if !f.matches(e) {
			return nil
		}
		f.held[store.KeyOf(e.Pool)] = true
		return e
	case discoveryv1.EventUpsert:
		k := store.KeyOf(e.Pool)
		if f.matches(e) {
			f.held[k] = true
			return e
		}
		if !f.mayHold(k) {
			return nil
		}
		f.held[k] = false
		return &store.Event{Event: discoveryv1.Event{Type: discoveryv1.EventDelete, Revision: e.Revision, Pool: &discoveryv1.Pool{Namespace: k.Namespace, Name: k.Name, Clusters: []discoveryv1.PoolCluster{}}}, At: e.At}
	case discoveryv1.EventDelete:
		k := store.KeyOf(e.Pool)
		if !f.mayHold(k) {
			return nil
		}
		f.held[k] = false
		return e
	}
	return e
}

func (f *watchFilter) mayHold(k store.Key) bool {
	if f.namespace != "" && k.Namespace != f.namespace {
		return false
	}
	held, known := f.held[k]
	return held || (!known && f.resumed)
}
