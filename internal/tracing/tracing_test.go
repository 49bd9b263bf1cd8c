package tracing

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A span's context goes into a record as a traceparent and comes out in
// another process as the parent of the next span: same trace, parent the
// writer's span.
func TestContextTravelsInRecords(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer(Scope)

	ctx, publish := tracer.Start(context.Background(), "publish")
	record := Inject(ctx)
	publish.End()
	if record == "" {
		t.Fatal("a sampled span injected no traceparent")
	}
	_, write := Start(context.Background(), tracer, "write", record)
	write.End()

	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans ended, want 2", len(spans))
	}
	parent, child := spans[0], spans[1]
	if child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("trace %s, want the publish's %s", child.SpanContext().TraceID(), parent.SpanContext().TraceID())
	}
	if child.Parent().SpanID() != parent.SpanContext().SpanID() || !child.Parent().IsRemote() {
		t.Errorf("parent %s (remote %v), want the publish's span %s, remote", child.Parent().SpanID(), child.Parent().IsRemote(), parent.SpanContext().SpanID())
	}
}

func TestNothingToCarry(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	off, err := Setup(context.Background(), Options{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	offCtx, offSpan := off.Tracer(Scope).Start(context.Background(), "publish")
	defer offSpan.End()

	for _, tc := range []struct {
		name   string
		ctx    context.Context
		record string
	}{
		{"no span", context.Background(), ""},
		{"tracing off", offCtx, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Inject(tc.ctx); got != tc.record {
				t.Errorf("Inject = %q, want %q", got, tc.record)
			}
		})
	}
	for _, record := range []string{"", "not a traceparent", "00-00000000000000000000000000000000-0000000000000000-01"} {
		t.Run("extract "+record, func(t *testing.T) {
			_, span := Start(context.Background(), tp.Tracer(Scope), "write", record)
			span.End()
			got := rec.Ended()[len(rec.Ended())-1]
			if got.Parent().IsValid() {
				t.Errorf("a span from record %q has parent %v, want a root", record, got.Parent())
			}
		})
	}
	if _, span := Start(context.Background(), nil, "write", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"); span.SpanContext().IsValid() || span.IsRecording() {
		t.Errorf("a nil tracer started span %v", span.SpanContext())
	}
}
