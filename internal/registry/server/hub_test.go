package server

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/view"
)

// importOfSize is an import event at rev whose encoding is about size
// bytes.
func importOfSize(rev int64, name string, size int) view.Event {
	return view.Event{WatchEvent: &registryv1.WatchEvent{Revision: rev, Event: &registryv1.WatchEvent_ImportUpsert{ImportUpsert: &registryv1.Import{
		Key: &registryv1.ImportKey{Namespace: "demo", Name: name}, Type: strings.Repeat("x", size),
	}}}}
}

func isCut(w *watcher) bool {
	select {
	case <-w.cut:
		return true
	default:
		return false
	}
}

// TestWatcherQueueIsBoundedInEventsAndBytes publishes to a watcher that
// takes nothing: it is cut off at the publish that would pass either
// bound, and not before; what it wrote out no longer counts.
func TestWatcherQueueIsBoundedInEventsAndBytes(t *testing.T) {
	const size = 1000 // about: an event's encoding adds a few bytes
	tests := []struct {
		name               string
		maxEvents, maxByte int
		// publishes are the events per publish; the watcher is cut at
		// publish cutAt (-1: never).
		publishes []int
		cutAt     int
	}{
		{name: "within both", maxEvents: 100, maxByte: 100 * (size + 100), publishes: []int{10, 10, 10}, cutAt: -1},
		{name: "past the events", maxEvents: 25, maxByte: 100 * (size + 100), publishes: []int{10, 10, 10}, cutAt: 2},
		{name: "past the bytes", maxEvents: 10000, maxByte: 25 * (size + 100), publishes: []int{10, 10, 10}, cutAt: 2},
		{name: "one publish past the bytes", maxEvents: 10000, maxByte: 5 * size, publishes: []int{10}, cutAt: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHub(1000, tc.maxEvents, tc.maxByte)
			w, _, _ := h.subscribe("", view.Admins, nil, 0, 0)
			rev := int64(0)
			for i, n := range tc.publishes {
				var events []view.Event
				for range n {
					rev++
					events = append(events, importOfSize(rev, fmt.Sprint("svc-", rev), size))
				}
				h.publish(events, nil)
				if got, want := isCut(w), tc.cutAt >= 0 && i >= tc.cutAt; got != want {
					t.Fatalf("after publish %d (%d events of %d bytes): cut off %v, want %v", i, n, size, got, want)
				}
			}
		})
	}
}

func TestWrittenEventsFreeTheWatchersBudget(t *testing.T) {
	const size = 1000
	h := newHub(1000, 10000, 15*size)
	w, _, _ := h.subscribe("", view.Admins, nil, 0, 0)
	var batch []*encoded
	for rev := int64(1); rev <= 100; rev++ {
		h.publish([]view.Event{importOfSize(rev, "svc", size)}, nil)
		if rev%10 == 0 { // the stream keeps up, ten at a time
			batch = w.take(batch)
			for _, e := range batch {
				w.written(e)
			}
			clear(batch)
		}
		if isCut(w) {
			t.Fatalf("cut off at revision %d though never more than ten events of %d bytes were queued", rev, size)
		}
	}
	if w.pending != 0 || w.pendingBytes != 0 {
		t.Errorf("after writing everything the watcher holds %d events, %d bytes; want none", w.pending, w.pendingBytes)
	}
}

// TestWatchersAllocateNothingAhead: a watcher's queue grows with what is
// queued, so an idle watch costs a few hundred bytes however large its
// bound.
func TestWatchersAllocateNothingAhead(t *testing.T) {
	const watchers = 1000
	h := newHub(1000, 10000, DefaultWatcherBufferBytes)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range watchers {
		h.subscribe("", view.Admins, nil, 0, 0)
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / watchers
	t.Logf("%d bytes per watcher subscribed", per)
	if per > 4<<10 {
		t.Errorf("a watcher allocates %d bytes when subscribed; want at most 4 KiB", per)
	}
}
