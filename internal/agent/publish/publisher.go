// Package publish writes this cluster's exports and endpoint chunks to the
// registry, remembering what the registry acknowledged so that an unchanged
// record is never written twice. When the registry loses records, Forget
// makes the next publish write them again; a write that was in flight when
// the loss was noticed is not taken as acknowledged.
package publish

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/validate"
	"github.com/fleetnet/fleetnet/internal/tracing"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// ExportKey is the namespace and name of an exported Service.
type ExportKey struct{ Namespace, Name string }

// Sent is what the registry acknowledged for one export.
type sent struct {
	export    *registryv1.Export
	exportRev int64
	chunks    map[string]*registryv1.EndpointChunk
	chunkRevs map[string]int64
}

// Metrics of publishing.
type Metrics struct {
	Writes  *prometheus.CounterVec // by kind (export, endpoints) and operation
	Errors  *prometheus.CounterVec // by gRPC code
	Latency prometheus.Histogram
}

// NewMetrics registers the publishing metrics with reg (when not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetnet_agent_registry_writes_total", Help: "Acknowledged registry writes by kind and operation.",
		}, []string{"kind", "operation"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetnet_agent_registry_errors_total", Help: "Failed registry calls by gRPC code.",
		}, []string{"code"}),
		Latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fleetnet_agent_publish_duration_seconds", Help: "Time to publish one export and its endpoints.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
	}
	if reg != nil {
		reg.MustRegister(m.Writes, m.Errors, m.Latency)
	}
	return m
}

// Publisher writes one cluster's records.
type Publisher struct {
	// Tracer, when set, traces each publish that writes something
	// (keys.SpanPublish, a root span): the records written carry it in
	// their trace_parent (internal/tracing).
	Tracer trace.Tracer

	client  registryv1.RegistryClient
	cluster string
	metrics *Metrics

	mu    sync.Mutex
	epoch map[ExportKey]int // bumped by Forget
	sent  map[ExportKey]*sent
}

// New returns a publisher for cluster.
func New(client registryv1.RegistryClient, cluster string, metrics *Metrics) *Publisher {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	return &Publisher{client: client, cluster: cluster, metrics: metrics, epoch: map[ExportKey]int{}, sent: map[ExportKey]*sent{}}
}

// Reset replaces what the publisher believes with what the registry holds
// (from ListExports with endpoints), so that a restarted or re-registered
// agent writes only what is missing or different. Writes in flight are not
// recorded.
func (p *Publisher) Reset(resp *registryv1.ListExportsResponse) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key := range p.sent {
		p.epoch[key]++
	}
	p.sent = map[ExportKey]*sent{}
	for _, e := range resp.GetExports() {
		k := ExportKey{e.GetKey().GetNamespace(), e.GetKey().GetName()}
		p.epoch[k]++
		e = proto.Clone(e).(*registryv1.Export)
		rev := e.GetRevision()
		e.Revision = 0
		p.entry(k).export, p.entry(k).exportRev = e, rev
	}
	for _, c := range resp.GetEndpoints() {
		k := ExportKey{c.GetKey().GetNamespace(), c.GetKey().GetName()}
		s := p.entry(k)
		s.chunks[c.GetKey().GetChunk()] = c
		s.chunkRevs[c.GetKey().GetChunk()] = resp.GetRevision()
	}
}

func (p *Publisher) entry(k ExportKey) *sent {
	s := p.sent[k]
	if s == nil {
		s = &sent{chunks: map[string]*registryv1.EndpointChunk{}, chunkRevs: map[string]int64{}}
		p.sent[k] = s
	}
	return s
}

// Forget drops what was acknowledged for k (all exports when k is nil), so
// the next Publish writes everything again.
func (p *Publisher) Forget(k *ExportKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if k == nil {
		for key := range p.sent {
			p.epoch[key]++
		}
		p.sent = map[ExportKey]*sent{}
		return
	}
	p.epoch[*k]++
	delete(p.sent, *k)
}

// Acknowledged returns what the registry acknowledged for k: the export's
// revision and the chunk names with their revisions (zero when unknown).
func (p *Publisher) Acknowledged(k ExportKey) (exportRev int64, chunkRevs map[string]int64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.sent[k]
	if !ok || s.export == nil {
		return 0, nil, false
	}
	return s.exportRev, maps.Clone(s.chunkRevs), true
}

// Keys returns every export the publisher believes is in the registry.
func (p *Publisher) Keys() []ExportKey {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Collect(maps.Keys(p.sent))
}

// record marks a write as acknowledged unless k was forgotten meanwhile.
func (p *Publisher) record(k ExportKey, epoch int, fn func(s *sent)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.epoch[k] != epoch {
		return
	}
	fn(p.entry(k))
}

func (p *Publisher) count(kind, op string, err error) error {
	if err != nil {
		p.metrics.Errors.WithLabelValues(status.Code(err).String()).Inc()
		return err
	}
	p.metrics.Writes.WithLabelValues(kind, op).Inc()
	return nil
}

// Publish makes the registry hold export e and exactly the chunks given,
// writing only what differs from what it acknowledged before (a
// trace_parent is no difference). It returns the number of writes.
func (p *Publisher) Publish(ctx context.Context, e *registryv1.Export, chunks []*registryv1.EndpointChunk) (writes int, err error) {
	start := time.Now()
	k := ExportKey{e.GetKey().GetNamespace(), e.GetKey().GetName()}
	p.mu.Lock()
	epoch := p.epoch[k]
	var have *registryv1.Export
	haveChunks := map[string]*registryv1.EndpointChunk{}
	if s := p.sent[k]; s != nil {
		have = s.export
		maps.Copy(haveChunks, s.chunks)
	}
	p.mu.Unlock()

	// The span starts at the first write, so that a publish that finds
	// nothing to write (a resync, most reconciles) is no trace at all.
	var span trace.Span
	traceParent := ""
	traced := func() {
		if span != nil || p.Tracer == nil {
			return
		}
		ctx, span = p.Tracer.Start(ctx, keys.SpanPublish, trace.WithAttributes(attribute.String(keys.AttributeCluster, p.cluster),
			attribute.String(keys.AttributeNamespace, k.Namespace), attribute.String(keys.AttributeService, k.Name)))
		traceParent = tracing.Inject(ctx)
	}
	defer func() {
		if span != nil {
			span.SetAttributes(attribute.Int(keys.AttributeWrites, writes))
			tracing.End(span, err)
		}
	}()
	if !registryv1.EqualIgnoringTrace(have, e) {
		traced()
		// The chunks that differ go with the export, in one transaction, as
		// many as the registry takes in one (validate.MaxChunksWithExport*):
		// a new export reaches importers with its endpoints, in one event.
		with := changedChunks(haveChunks, chunks)
		with = with[:withExportCount(with)]
		req := &registryv1.PutExportRequest{Export: registryv1.WithTraceParent(e, traceParent)}
		for _, c := range with {
			req.Chunks = append(req.Chunks, registryv1.WithTraceParent(c, traceParent))
		}
		resp, err := p.client.PutExport(ctx, req)
		if err := p.count("export", "put", err); err != nil {
			return writes, fmt.Errorf("publishing export %s/%s: %w", k.Namespace, k.Name, err)
		}
		writes++
		// A registry from before PutExport took chunks writes none of them
		// (chunks_written 0): they go with PutEndpoints below.
		written := with[:min(len(with), int(max(0, resp.GetChunksWritten())))]
		for _, c := range written {
			p.count("endpoints", "put", nil)
			haveChunks[c.GetKey().GetChunk()] = c
		}
		p.record(k, epoch, func(s *sent) {
			s.export, s.exportRev = e, resp.GetRevision()
			for _, c := range written {
				s.chunks[c.GetKey().GetChunk()], s.chunkRevs[c.GetKey().GetChunk()] = c, resp.GetRevision()
			}
		})
	}
	want := map[string]bool{}
	for _, c := range chunks {
		name := c.GetKey().GetChunk()
		want[name] = true
		if sameChunk(haveChunks[name], c) {
			continue
		}
		traced()
		resp, err := p.client.PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: registryv1.WithTraceParent(c, traceParent)})
		if err := p.count("endpoints", "put", err); err != nil {
			return writes, fmt.Errorf("publishing endpoints %s of %s/%s: %w", name, k.Namespace, k.Name, err)
		}
		writes++
		p.record(k, epoch, func(s *sent) { s.chunks[name], s.chunkRevs[name] = c, resp.GetRevision() })
	}
	for _, name := range slices.Sorted(maps.Keys(haveChunks)) {
		if want[name] {
			continue
		}
		traced()
		_, err := p.client.DeleteEndpoints(ctx, &registryv1.DeleteEndpointsRequest{Key: haveChunks[name].GetKey()})
		if err := p.count("endpoints", "delete", err); err != nil {
			return writes, fmt.Errorf("withdrawing endpoints %s of %s/%s: %w", name, k.Namespace, k.Name, err)
		}
		writes++
		p.record(k, epoch, func(s *sent) { delete(s.chunks, name); delete(s.chunkRevs, name) })
	}
	p.metrics.Latency.Observe(time.Since(start).Seconds())
	return writes, nil
}

// sameChunk says whether c is what was acknowledged (have): most often
// the very object, which the exporter built from the same slice version
// (see export's chunk cache); a trace_parent is no difference.
func sameChunk(have, c *registryv1.EndpointChunk) bool {
	return have == c || registryv1.EqualIgnoringTrace(have, c)
}

// changedChunks returns the chunks that differ from what was acknowledged.
func changedChunks(have map[string]*registryv1.EndpointChunk, chunks []*registryv1.EndpointChunk) []*registryv1.EndpointChunk {
	var out []*registryv1.EndpointChunk
	for _, c := range chunks {
		if !sameChunk(have[c.GetKey().GetChunk()], c) {
			out = append(out, c)
		}
	}
	return out
}

// withExportCount is how many of chunks, from the first, fit in one
// PutExport (validate.MaxChunksWithExport and MaxChunksWithExportBytes,
// with room for a trace_parent each).
func withExportCount(chunks []*registryv1.EndpointChunk) int {
	const traceParentRoom = 64
	size := 0
	for i, c := range chunks {
		if i == validate.MaxChunksWithExport {
			return i
		}
		if size += proto.Size(c) + traceParentRoom; size > validate.MaxChunksWithExportBytes {
			return i
		}
	}
	return len(chunks)
}

// Withdraw removes export k and its chunks from the registry. With
// ifRevision it removes the export only if it was last written then.
func (p *Publisher) Withdraw(ctx context.Context, k ExportKey, ifRevision int64) error {
	// Forgotten first: the status stream may report the export gone before
	// the call returns, which would otherwise read as a loss to repair.
	p.Forget(&k)
	_, err := p.client.DeleteExport(ctx, &registryv1.DeleteExportRequest{
		Key:        &registryv1.ExportKey{Namespace: k.Namespace, Name: k.Name, ClusterId: p.cluster},
		IfRevision: ifRevision,
	})
	if err := p.count("export", "delete", err); err != nil {
		return fmt.Errorf("withdrawing export %s/%s: %w", k.Namespace, k.Name, err)
	}
	return nil
}
