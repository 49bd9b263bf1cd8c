package importer

import (
	"testing"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	traceA = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	traceB = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

// A snapshot after a reconnect whose imports differ only in their traces
// changes nothing: no reconcile is asked for.
func TestSameDesiredIgnoresTraces(t *testing.T) {
	desired := func(imp, chunk, addr string) *Desired {
		return &Desired{
			Import: &registryv1.Import{Key: &registryv1.ImportKey{Namespace: "demo", Name: "echo"}, Type: "ClusterSetIP", TraceParent: imp},
			Chunks: map[string]map[string]*registryv1.EndpointChunk{"a": {"s1": {
				AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{{Addresses: []string{addr}}}, TraceParent: chunk,
			}}},
		}
	}
	for _, tc := range []struct {
		name string
		a, b *Desired
		want bool
	}{
		{"other traces", desired(traceA, traceA, "10.0.0.1"), desired(traceB, "", "10.0.0.1"), true},
		{"other endpoints", desired(traceA, traceA, "10.0.0.1"), desired(traceA, traceA, "10.0.0.2"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sameDesired(tc.a, tc.b); got != tc.want {
				t.Errorf("sameDesired = %v, want %v", got, tc.want)
			}
		})
	}
}

// The apply takes the trace of the last change received, once; a failed
// apply gives it back unless a newer change came.
func TestStreamTraceParents(t *testing.T) {
	s := &Stream{}
	k := types.NamespacedName{Namespace: "demo", Name: "echo"}
	s.mu.Lock()
	s.noteTrace(k, eventTraceParent(&registryv1.WatchEvent{Event: &registryv1.WatchEvent_ImportUpsert{ImportUpsert: &registryv1.Import{TraceParent: traceA}}}))
	s.noteTrace(k, eventTraceParent(&registryv1.WatchEvent{Event: &registryv1.WatchEvent_EndpointsUpsert{EndpointsUpsert: &registryv1.EndpointChunk{TraceParent: traceB}}}))
	s.noteTrace(k, eventTraceParent(&registryv1.WatchEvent{Event: &registryv1.WatchEvent_ImportDelete{ImportDelete: &registryv1.ImportKey{}}}))
	s.mu.Unlock()
	if got := s.TakeTraceParent(k); got != traceB {
		t.Fatalf("took %q, want the last traced change's %q", got, traceB)
	}
	if got := s.TakeTraceParent(k); got != "" {
		t.Fatalf("took %q a second time", got)
	}
	s.ReturnTraceParent(k, traceB)
	s.mu.Lock()
	s.noteTrace(k, traceA)
	s.mu.Unlock()
	s.ReturnTraceParent(k, traceB)
	if got := s.TakeTraceParent(k); got != traceA {
		t.Errorf("after a newer change, took %q, want %q", got, traceA)
	}
}
