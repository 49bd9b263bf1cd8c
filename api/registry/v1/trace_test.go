package registryv1

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

func TestEqualIgnoringTrace(t *testing.T) {
	export := func(port int32, traceParent string) *Export {
		return &Export{Key: &ExportKey{Namespace: "demo", Name: "echo", ClusterId: "a"}, Type: "ClusterSetIP",
			Ports: []*ServicePort{{Name: "http", Protocol: "TCP", Port: port}}, TraceParent: traceParent}
	}
	chunk := func(addr, traceParent string) *EndpointChunk {
		return &EndpointChunk{Key: &ChunkKey{Namespace: "demo", Name: "echo", ClusterId: "a", Chunk: "s1"}, AddressType: "IPv4",
			Endpoints: []*Endpoint{{Addresses: []string{addr}}}, TraceParent: traceParent}
	}
	for _, tc := range []struct {
		name string
		a, b proto.Message
		want bool
	}{
		{"exports, one traced", export(80, ""), export(80, tp), true},
		{"exports, other traces", export(80, tp), export(80, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), true},
		{"exports, other ports", export(80, tp), export(81, tp), false},
		{"chunks, one traced", chunk("10.0.0.1", tp), chunk("10.0.0.1", ""), true},
		{"chunks, other endpoints", chunk("10.0.0.1", tp), chunk("10.0.0.2", tp), false},
		{"imports, one traced", &Import{Type: "Headless", TraceParent: tp}, &Import{Type: "Headless"}, true},
		{"nil and traced", (*Export)(nil), export(80, tp), false},
		{"nil and nil", (*Export)(nil), (*Export)(nil), true},
		{"messages without the field", &ServicePort{Port: 1}, &ServicePort{Port: 1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := EqualIgnoringTrace(tc.a, tc.b); got != tc.want {
				t.Errorf("EqualIgnoringTrace = %v, want %v", got, tc.want)
			}
		})
	}
}

// WithTraceParent leaves the record it copies as it was: the publisher
// keeps (and compares) what it wrote, the view what it serves.
func TestWithTraceParentCopies(t *testing.T) {
	orig := &Export{Key: &ExportKey{Namespace: "demo", Name: "echo", ClusterId: "a"}, Weight: 3}
	got := WithTraceParent(orig, tp)
	if got == orig || got.GetTraceParent() != tp || orig.GetTraceParent() != "" {
		t.Fatalf("WithTraceParent(orig) = %v (orig now %v): want a copy carrying %s", got, orig, tp)
	}
	if got.GetWeight() != 3 || got.GetKey() != orig.GetKey() {
		t.Errorf("the copy lost fields or deep-copied them: %v", got)
	}
	if again := WithTraceParent(got, tp); again != got {
		t.Errorf("a record already carrying the trace was copied again")
	}
	if cleared := WithTraceParent(got, ""); cleared.GetTraceParent() != "" || got.GetTraceParent() != tp {
		t.Errorf("clearing: got %q, original now %q", cleared.GetTraceParent(), got.GetTraceParent())
	}
}
