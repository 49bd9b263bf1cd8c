package agent_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/agent/app"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/internal/tracing"
	"github.com/fleetnet/fleetnet/test/fleet"
	collectortracev1 "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// collectedSpan is one span as the collector received it.
type collectedSpan struct {
	name, service     string
	trace, id, parent string
	attrs, resource   map[string]string
}

// collector is an OTLP/gRPC trace collector on loopback that keeps every
// span it is sent.
type collector struct {
	collectortracev1.UnimplementedTraceServiceServer
	addr string

	mu    sync.Mutex
	spans []collectedSpan
}

func startCollector(t *testing.T) *collector {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{addr: lis.Addr().String()}
	s := grpc.NewServer()
	collectortracev1.RegisterTraceServiceServer(s, c)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return c
}

func attributes(kvs []*commonv1.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonv1.AnyValue_StringValue:
			out[kv.GetKey()] = v.StringValue
		case *commonv1.AnyValue_IntValue:
			out[kv.GetKey()] = fmt.Sprint(v.IntValue)
		}
	}
	return out
}

// Export keeps the spans of a request.
func (c *collector) Export(_ context.Context, req *collectortracev1.ExportTraceServiceRequest) (*collectortracev1.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		res := attributes(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, collectedSpan{
					name: s.GetName(), service: res["service.name"], resource: res, attrs: attributes(s.GetAttributes()),
					trace: hex.EncodeToString(s.GetTraceId()), id: hex.EncodeToString(s.GetSpanId()), parent: hex.EncodeToString(s.GetParentSpanId()),
				})
			}
		}
	}
	return &collectortracev1.ExportTraceServiceResponse{}, nil
}

func (c *collector) collected() []collectedSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]collectedSpan(nil), c.spans...)
}

// hop is what one span of a traced path must be.
type hop struct {
	name, service string
	attrs         map[string]string
	root          bool
}

func (h hop) matches(s collectedSpan) error {
	if s.name != h.name || s.service != h.service {
		return fmt.Errorf("span %s of %s, want %s of %s", s.name, s.service, h.name, h.service)
	}
	for k, v := range h.attrs {
		got, ok := s.attrs[k]
		if strings.HasPrefix(k, "resource:") {
			got, ok = s.resource[strings.TrimPrefix(k, "resource:")]
		}
		if !ok || got != v {
			return fmt.Errorf("span %s has %s=%q, want %q", s.name, k, got, v)
		}
	}
	if h.root && s.parent != "" {
		return fmt.Errorf("span %s has parent %s, want none", s.name, s.parent)
	}
	return nil
}

// TestExportPathIsOneTrace exports a Service in east and finds, in what an
// in-process OTLP collector received, one trace from east's publish to
// west's apply of the import, each span the parent of the next: the
// context travels in the registry's records and watch events.
func TestExportPathIsOneTrace(t *testing.T) {
	col := startCollector(t)
	traced := tracing.Options{Endpoint: col.addr, Insecure: true, BatchTimeout: 50 * time.Millisecond}
	regTraces, err := tracing.Setup(context.Background(), traced, "fleetnet-registry")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = regTraces.Shutdown(context.Background()) })

	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}, {Name: "west"}}})
	east, west := f.Cluster(t, "east"), f.Cluster(t, "west")
	r := registrytest.Start(t, server.Config{TracerProvider: regTraces})
	ec, wc := east.Client(t), west.Client(t)
	ctx := context.Background()
	createNamespace(t, ec, ns)
	createNamespace(t, wc, ns)
	withTraces := func(o *app.Options) { o.Tracing = traced }
	startAgent(t, east, r, "east", withTraces)
	wa := startAgent(t, west, r, "west", withTraces)
	// west follows the registry's changes (not a later snapshot of them).
	testkit.Eventually(t, 20*time.Second, "west's registry stream to be synced", func(context.Context) error {
		if g := wa.gauge(t, "fleetnet_agent_registry_stream_synced", nil); g != 1 {
			return errorf("stream synced = %v", g)
		}
		return nil
	})

	// A Service without endpoints: the export record is the only write.
	if err := ec.Create(ctx, service(ns, "echo")); err != nil {
		t.Fatal(err)
	}
	if err := ec.Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "west's ServiceImport", func(ctx context.Context) error {
		return wc.Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, &mcsv1beta1.ServiceImport{})
	})

	svc := map[string]string{keys.AttributeNamespace: ns, keys.AttributeService: "echo"}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	// From the apply up to the publish, each the child of the next.
	path := []hop{
		{name: keys.SpanApplyImport, service: "fleetnet-agent", attrs: with(svc, keys.AttributeCluster, "west", "resource:"+keys.ResourceClusterID, "west")},
		{name: keys.SpanFanout, service: "fleetnet-registry", attrs: with(svc, keys.AttributeEvent, "import_upsert")},
		{name: keys.SpanPutExport, service: "fleetnet-registry", attrs: with(svc, keys.AttributeCluster, "east")},
		{name: keys.SpanPublish, service: "fleetnet-agent", attrs: with(svc, keys.AttributeCluster, "east", "resource:"+keys.ResourceClusterID, "east", keys.AttributeWrites, "1"), root: true},
	}
	testkit.Eventually(t, 30*time.Second, "the export's path as one trace", func(context.Context) error {
		spans := col.collected()
		byID := map[string]collectedSpan{}
		for _, s := range spans {
			byID[s.id] = s
		}
		var last error = fmt.Errorf("no %s span of west among %d spans", keys.SpanApplyImport, len(spans))
	applies:
		for _, s := range spans {
			if path[0].matches(s) != nil {
				continue
			}
			trace := s.trace
			for i, h := range path {
				if err := h.matches(s); err != nil {
					last = fmt.Errorf("hop %d: %w", i, err)
					continue applies
				}
				if s.trace != trace {
					last = fmt.Errorf("hop %d: %s in trace %s, want %s", i, s.name, s.trace, trace)
					continue applies
				}
				if i+1 < len(path) {
					parent, ok := byID[s.parent]
					if !ok {
						last = fmt.Errorf("hop %d: the parent %q of %s was not received", i, s.parent, s.name)
						continue applies
					}
					s = parent
				}
			}
			return nil
		}
		return last
	})
}
