package publish

import (
	"context"
	"testing"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
)

// fakeRegistry records the writes it is sent.
type fakeRegistry struct {
	registryv1.RegistryClient
	exports []*registryv1.Export
	chunks  []*registryv1.EndpointChunk
}

func (f *fakeRegistry) PutExport(_ context.Context, req *registryv1.PutExportRequest, _ ...grpc.CallOption) (*registryv1.PutExportResponse, error) {
	f.exports = append(f.exports, req.GetExport())
	return &registryv1.PutExportResponse{Revision: int64(len(f.exports) + len(f.chunks))}, nil
}

func (f *fakeRegistry) PutEndpoints(_ context.Context, req *registryv1.PutEndpointsRequest, _ ...grpc.CallOption) (*registryv1.PutEndpointsResponse, error) {
	f.chunks = append(f.chunks, req.GetChunk())
	return &registryv1.PutEndpointsResponse{Revision: int64(len(f.exports) + len(f.chunks))}, nil
}

const storedTrace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

func records() (*registryv1.Export, *registryv1.EndpointChunk) {
	return &registryv1.Export{Key: &registryv1.ExportKey{Namespace: "demo", Name: "echo", ClusterId: "a"}, Type: "ClusterSetIP",
			Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}},
		&registryv1.EndpointChunk{Key: &registryv1.ChunkKey{Namespace: "demo", Name: "echo", ClusterId: "a", Chunk: "s1"}, AddressType: "IPv4",
			Endpoints: []*registryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}}
}

// A publish that writes carries its span in every record it writes, and
// keeps the records it was given as they were; a publish of what the
// registry already holds, whatever trace the registry's records carry
// (read back after a restart), writes nothing and traces nothing.
func TestPublishCarriesItsTraceAndIgnoresStoredOnes(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	reg := &fakeRegistry{}
	p := New(reg, "a", nil)
	p.Tracer = tp.Tracer("test")

	e, c := records()
	if n, err := p.Publish(context.Background(), e, []*registryv1.EndpointChunk{c}); err != nil || n != 2 {
		t.Fatalf("first publish: %d writes, %v; want 2", n, err)
	}
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Name() != "agent.publish" || spans[0].Parent().IsValid() {
		t.Fatalf("spans %v, want one root agent.publish", spans)
	}
	want := spans[0].SpanContext()
	for _, tpw := range []string{reg.exports[0].GetTraceParent(), reg.chunks[0].GetTraceParent()} {
		if tpw != "00-"+want.TraceID().String()+"-"+want.SpanID().String()+"-01" {
			t.Errorf("a record was written with trace_parent %q, want the publish's span %s", tpw, want.SpanID())
		}
	}
	if e.GetTraceParent() != "" || c.GetTraceParent() != "" {
		t.Errorf("the caller's records were changed: %q, %q", e.GetTraceParent(), c.GetTraceParent())
	}

	// Restarted: what the registry holds comes back with its traces.
	p = New(reg, "a", nil)
	p.Tracer = tp.Tracer("test")
	held, heldChunk := records()
	held.TraceParent, heldChunk.TraceParent, held.Revision = storedTrace, storedTrace, 1
	p.Reset(&registryv1.ListExportsResponse{Exports: []*registryv1.Export{held}, Endpoints: []*registryv1.EndpointChunk{heldChunk}, Revision: 2})
	e, c = records()
	if n, err := p.Publish(context.Background(), e, []*registryv1.EndpointChunk{c}); err != nil || n != 0 {
		t.Errorf("republishing what the registry holds: %d writes, %v; want none", n, err)
	}
	if got := len(rec.Ended()); got != 1 {
		t.Errorf("%d spans after a publish that wrote nothing, want still 1", got)
	}
}
