// Package tracing sets up OpenTelemetry traces for fleetnet's binaries and
// carries a trace's context in the registry's records (their trace_parent,
// a W3C traceparent), so that an export's path — the exporting agent's
// publish, the registry's write and fan-out, each importing agent's apply —
// is one trace across processes. Tracing is off unless an OTLP endpoint is
// given: the binaries then use a no-op provider, start no exporter and
// carry no context.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Scope is the instrumentation scope of fleetnet's spans.
const Scope = "github.com/fleetnet/fleetnet"

// Options are a binary's tracing flags.
type Options struct {
	// Endpoint is the host:port of an OTLP/gRPC collector; empty turns
	// tracing off.
	Endpoint string
	// Insecure sends spans without TLS (a collector on the same node or in
	// the same pod).
	Insecure bool
	// BatchTimeout is how long spans wait to be sent in a batch; the
	// SDK's default (OTEL_BSP_SCHEDULE_DELAY, else 5s) when zero. Tests
	// shorten it.
	BatchTimeout time.Duration
}

// BindFlags registers --otlp-endpoint and --otlp-insecure on fs.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Endpoint, "otlp-endpoint", "", "host:port of an OpenTelemetry collector (OTLP over gRPC) to send traces to; empty: tracing off. The standard OTEL_EXPORTER_OTLP_* variables (headers, certificate, timeout, compression), OTEL_TRACES_SAMPLER and OTEL_RESOURCE_ATTRIBUTES apply")
	fs.BoolVar(&o.Insecure, "otlp-insecure", false, "send traces to --otlp-endpoint without TLS")
}

// Enabled reports whether traces are sent anywhere.
func (o Options) Enabled() bool { return o.Endpoint != "" }

// Provider is a tracer provider and what flushes it.
type Provider struct {
	trace.TracerProvider
	shutdown func(context.Context) error
}

// Shutdown sends the spans still buffered and stops the exporter; with
// tracing off it does nothing.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.shutdown == nil {
		return nil
	}
	if err := p.shutdown(ctx); err != nil {
		return fmt.Errorf("flushing traces: %w", err)
	}
	return nil
}

// Setup returns the tracer provider of a binary: a no-op one when o has
// no endpoint, else one that batches spans to the OTLP collector, with
// service.name set to service and attrs as further resource attributes
// (an agent's cluster id). The exporter connects lazily: an unreachable
// collector costs dropped spans, never a failed start.
func Setup(ctx context.Context, o Options, service string, attrs ...attribute.KeyValue) (*Provider, error) {
	if !o.Enabled() {
		return &Provider{TracerProvider: noop.NewTracerProvider()}, nil
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(o.Endpoint)}
	if o.Insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("--otlp-endpoint=%s: %w", o.Endpoint, err)
	}
	res, err := resource.New(ctx,
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
		resource.WithAttributes(append([]attribute.KeyValue{semconv.ServiceName(service)}, attrs...)...),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("describing the tracing resource: %w", err)
	}
	var batch []sdktrace.BatchSpanProcessorOption
	if o.BatchTimeout > 0 {
		batch = append(batch, sdktrace.WithBatchTimeout(o.BatchTimeout))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, batch...), sdktrace.WithResource(res))
	return &Provider{TracerProvider: tp, shutdown: tp.Shutdown}, nil
}

// propagator carries a span context as a W3C traceparent.
var propagator = propagation.TraceContext{}

// Inject returns the W3C traceparent of ctx's span, to be written into a
// record; "" when ctx has no valid span (tracing off, or nothing traced).
func Inject(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagator.Inject(ctx, carrier)
	return carrier.Get("traceparent")
}

// Extract returns ctx with the span context of traceParent (read from a
// record) as its remote parent; ctx unchanged when traceParent is empty or
// not a valid traceparent.
func Extract(ctx context.Context, traceParent string) context.Context {
	if traceParent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{"traceparent": traceParent})
}

// Start starts a span named name as a child of the span context carried by
// traceParent (or of ctx's span when traceParent is empty or invalid).
// With a nil tracer it starts nothing and returns ctx and a no-op span.
func Start(ctx context.Context, tracer trace.Tracer, name, traceParent string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if tracer == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	return tracer.Start(Extract(ctx, traceParent), name, trace.WithAttributes(attrs...))
}

// End ends span, recording err (when not nil) as its status.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
