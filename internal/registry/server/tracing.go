package server

import (
	"context"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/view"
	"github.com/fleetnet/fleetnet/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Traces of an export's path (docs/decisions/0131-export-path-traces.md):
// a write's span is the child of the trace_parent its record came
// with (the agent's publish) and replaces it in the stored record, so that
// the fan-out of what the record changed, by whichever replica serves the
// watchers, is the write's child; each fanned-out import or chunk carries
// the fan-out's span to the importing agents.

// startWrite starts the span of a write of record, child of the record's
// trace_parent, and returns the trace_parent to store with it.
func (r *Registry) startWrite(ctx context.Context, name, traceParent string, attrs ...attribute.KeyValue) (context.Context, trace.Span, string) {
	ctx, span := tracing.Start(ctx, r.tracer, name, traceParent, attrs...)
	return ctx, span, tracing.Inject(ctx)
}

// fanout hands events to the watchers, with a span for each event that
// carries a trace_parent (a traced write changed it): the span is the
// write's child, and the event goes out carrying the span in place of the
// write's. Untraced events cost nothing more.
func (r *Registry) fanout(ctx context.Context, events []view.Event) {
	var spans map[int]trace.Span
	for i, e := range events {
		var tp, kind string
		var attrs []attribute.KeyValue
		switch ev := e.GetEvent().(type) {
		case *registryv1.WatchEvent_ImportUpsert:
			k := ev.ImportUpsert.GetKey()
			tp, kind = ev.ImportUpsert.GetTraceParent(), "import_upsert"
			attrs = []attribute.KeyValue{attribute.String(keys.AttributeNamespace, k.GetNamespace()), attribute.String(keys.AttributeService, k.GetName())}
		case *registryv1.WatchEvent_EndpointsUpsert:
			k := ev.EndpointsUpsert.GetKey()
			tp, kind = ev.EndpointsUpsert.GetTraceParent(), "endpoints_upsert"
			attrs = []attribute.KeyValue{attribute.String(keys.AttributeCluster, k.GetClusterId()), attribute.String(keys.AttributeNamespace, k.GetNamespace()),
				attribute.String(keys.AttributeService, k.GetName()), attribute.String(keys.AttributeChunk, k.GetChunk())}
		}
		if tp == "" {
			continue
		}
		sctx, span := tracing.Start(ctx, r.tracer, keys.SpanFanout, tp, append(attrs, attribute.String(keys.AttributeEvent, kind))...)
		if spans == nil {
			spans = map[int]trace.Span{}
		}
		spans[i] = span
		// A copy: the view keeps its message (and the write's trace_parent,
		// which a later snapshot sends).
		out := &registryv1.WatchEvent{Revision: e.GetRevision()}
		switch ev := e.GetEvent().(type) {
		case *registryv1.WatchEvent_ImportUpsert:
			out.Event = &registryv1.WatchEvent_ImportUpsert{ImportUpsert: registryv1.WithTraceParent(ev.ImportUpsert, tracing.Inject(sctx))}
		case *registryv1.WatchEvent_EndpointsUpsert:
			out.Event = &registryv1.WatchEvent_EndpointsUpsert{EndpointsUpsert: registryv1.WithTraceParent(ev.EndpointsUpsert, tracing.Inject(sctx))}
		}
		events[i].WatchEvent = out
	}
	if spans == nil {
		r.hub.publish(events, nil)
		return
	}
	reached := make([]int, len(events))
	r.hub.publish(events, reached)
	for i, span := range spans {
		span.SetAttributes(attribute.Int(keys.AttributeWatchers, reached[i]))
		span.End()
	}
}
