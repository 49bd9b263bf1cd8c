package server

import (
	"context"
	"errors"
	"slices"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/api/skew"
	"github.com/fleetnet/fleetnet/internal/registry/auth"
	"github.com/fleetnet/fleetnet/internal/registry/keyspace"
	"github.com/fleetnet/fleetnet/internal/registry/store"
	"github.com/fleetnet/fleetnet/internal/registry/validate"
	"github.com/fleetnet/fleetnet/internal/registry/view"
	"github.com/fleetnet/fleetnet/internal/skewcheck"
	"github.com/fleetnet/fleetnet/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func invalid(errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return status.Error(codes.InvalidArgument, errs.ToAggregate().Error())
}

// storeErr turns a store failure into Unavailable: the client retries.
func storeErr(err error) error {
	if _, ok := status.FromError(err); ok && status.Code(err) != codes.Unknown {
		return err
	}
	return status.Errorf(codes.Unavailable, "registry store: %v", err)
}

func (r *Registry) RegisterCluster(ctx context.Context, req *registryv1.RegisterClusterRequest) (*registryv1.RegisterClusterResponse, error) {
	c := req.GetCluster()
	if err := invalid(validate.Cluster(c, field.NewPath("cluster"))); err != nil {
		return nil, err
	}
	if err := auth.RequireCluster(ctx, c.GetId()); err != nil {
		return nil, err
	}
	existing, _, err := r.store.Get(ctx, keyspace.ClusterKey(c.GetId()))
	if err != nil {
		return nil, storeErr(err)
	}
	record := &registryv1.Cluster{Id: c.GetId(), ClustersetId: c.GetClustersetId(), Region: c.GetRegion(), Properties: c.GetProperties(), EastwestGateway: c.GetEastwestGateway(), RegisteredAt: timestamppb.New(r.cfg.Clock.Now())}
	// The interceptor refused what is not a version.
	record.AgentVersion, _ = skew.Normalize(skewcheck.FromIncoming(ctx).Version)
	if existing != nil {
		old := &registryv1.Cluster{}
		if err := proto.Unmarshal(existing.Value, old); err != nil {
			return nil, storeErr(err)
		}
		if old.GetClustersetId() != c.GetClustersetId() {
			return nil, status.Errorf(codes.FailedPrecondition, "cluster %q is registered in clusterset %q, not %q; deregister it first", c.GetId(), old.GetClustersetId(), c.GetClustersetId())
		}
		record.RegisteredAt = old.GetRegisteredAt()
		if !proto.Equal(old, record) {
			existing = nil // region or properties changed: rewrite
		}
	}
	if existing == nil {
		b, _ := proto.Marshal(record)
		if _, err := r.store.Put(ctx, keyspace.ClusterKey(c.GetId()), b, 0); err != nil {
			return nil, storeErr(err)
		}
	}
	// Keep the current lease when it is alive; otherwise grant a new one.
	if live, _, err := r.store.Get(ctx, keyspace.LiveKey(c.GetId())); err != nil {
		return nil, storeErr(err)
	} else if live != nil {
		if id, err := keyspace.DecodeLease(live.Value); err == nil && r.store.KeepAlive(ctx, id) == nil {
			return &registryv1.RegisterClusterResponse{Cluster: record, LeaseTtlSeconds: r.ttlSeconds()}, nil
		}
	}
	lease, err := r.store.GrantLease(ctx, r.ttlSeconds())
	if err != nil {
		return nil, storeErr(err)
	}
	if _, err := r.store.Put(ctx, keyspace.LiveKey(c.GetId()), keyspace.EncodeLease(lease), lease); err != nil {
		return nil, storeErr(err)
	}
	r.log.Info("cluster registered", "cluster", c.GetId(), "clusterset", c.GetClustersetId(), "region", c.GetRegion(), "agentVersion", record.GetAgentVersion())
	return &registryv1.RegisterClusterResponse{Cluster: record, LeaseTtlSeconds: r.ttlSeconds()}, nil
}

func (r *Registry) ttlSeconds() int64 { return max(1, int64(r.cfg.LeaseTTL.Seconds())) }

func (r *Registry) RenewLease(ctx context.Context, req *registryv1.RenewLeaseRequest) (*registryv1.RenewLeaseResponse, error) {
	if err := invalid(validate.ClusterID(req.GetClusterId(), field.NewPath("clusterId"))); err != nil {
		return nil, err
	}
	if err := auth.RequireCluster(ctx, req.GetClusterId()); err != nil {
		return nil, err
	}
	notFound := status.Errorf(codes.NotFound, "cluster %q holds no lease: register again and republish every export", req.GetClusterId())
	// The view knows the cluster's lease: keep it alive in one call to the
	// store, not three. A lease the view no longer finds alive may have been
	// replaced through another replica that this view has not seen yet, so
	// only the store's records answer NotFound.
	if _, lease, ok := r.viewCluster(req.GetClusterId()); ok && lease != 0 {
		switch err := r.store.KeepAlive(ctx, lease); {
		case err == nil:
			return &registryv1.RenewLeaseResponse{LeaseTtlSeconds: r.ttlSeconds()}, nil
		case !errors.Is(err, store.ErrLeaseNotFound):
			return nil, storeErr(err)
		}
	}
	cluster, _, err := r.store.Get(ctx, keyspace.ClusterKey(req.GetClusterId()))
	if err != nil {
		return nil, storeErr(err)
	}
	live, _, err := r.store.Get(ctx, keyspace.LiveKey(req.GetClusterId()))
	if err != nil {
		return nil, storeErr(err)
	}
	if cluster == nil || live == nil {
		return nil, notFound
	}
	id, err := keyspace.DecodeLease(live.Value)
	if err != nil {
		return nil, notFound
	}
	if err := r.store.KeepAlive(ctx, id); errors.Is(err, store.ErrLeaseNotFound) {
		return nil, notFound
	} else if err != nil {
		return nil, storeErr(err)
	}
	return &registryv1.RenewLeaseResponse{LeaseTtlSeconds: r.ttlSeconds()}, nil
}

func (r *Registry) DeregisterCluster(ctx context.Context, req *registryv1.DeregisterClusterRequest) (*registryv1.DeregisterClusterResponse, error) {
	if err := invalid(validate.ClusterID(req.GetClusterId(), field.NewPath("clusterId"))); err != nil {
		return nil, err
	}
	if err := auth.RequireCluster(ctx, req.GetClusterId()); err != nil {
		return nil, err
	}
	if err := r.removeCluster(ctx, req.GetClusterId()); err != nil {
		return nil, err
	}
	r.log.Info("cluster deregistered", "cluster", req.GetClusterId())
	return &registryv1.DeregisterClusterResponse{}, nil
}

func (r *Registry) EvictCluster(ctx context.Context, req *registryv1.EvictClusterRequest) (*registryv1.EvictClusterResponse, error) {
	if err := auth.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	if err := invalid(validate.ClusterID(req.GetClusterId(), field.NewPath("clusterId"))); err != nil {
		return nil, err
	}
	if err := r.removeCluster(ctx, req.GetClusterId()); err != nil {
		return nil, err
	}
	id, _ := auth.FromContext(ctx)
	r.log.Info("cluster evicted", "cluster", req.GetClusterId(), "by", id.String())
	return &registryv1.EvictClusterResponse{}, nil
}

// removeCluster deletes the liveness record first, so the cluster stops
// participating at once, then its exports and chunks, then the cluster.
func (r *Registry) removeCluster(ctx context.Context, id string) error {
	if _, _, err := r.store.Delete(ctx, keyspace.LiveKey(id), 0); err != nil {
		return storeErr(err)
	}
	kvs, _, err := r.store.List(ctx, keyspace.ExportsPrefix)
	if err != nil {
		return storeErr(err)
	}
	chunks, _, err := r.store.List(ctx, keyspace.EndpointsPrefix)
	if err != nil {
		return storeErr(err)
	}
	for _, kv := range append(chunks, kvs...) {
		if keyspace.Parse(kv.Key).ClusterID != id {
			continue
		}
		if _, _, err := r.store.Delete(ctx, kv.Key, 0); err != nil {
			return storeErr(err)
		}
	}
	if _, _, err := r.store.Delete(ctx, keyspace.ClusterKey(id), 0); err != nil {
		return storeErr(err)
	}
	return nil
}

// viewCluster returns what the view holds of a cluster: its lease (zero
// when not live) and whether it is registered.
func (r *Registry) viewCluster(id string) (*registryv1.Cluster, store.LeaseID, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.synced {
		return nil, 0, false
	}
	return r.view.Cluster(id)
}

// requireRegistered refuses writes of a cluster the registry does not hold:
// the agent must register (and then republish) first.
func (r *Registry) requireRegistered(ctx context.Context, id string) error {
	// The view answers for a live cluster it holds, sparing a linearizable
	// read per write; it may lag the store by a few milliseconds, so only
	// the store answers "not registered". A cluster evicted in those
	// milliseconds could slip a write through, as it could between a read
	// and a write of the store before: such a record belongs to no
	// registered cluster and takes part in no import.
	if _, lease, ok := r.viewCluster(id); ok && lease != 0 {
		return nil
	}
	kv, _, err := r.store.Get(ctx, keyspace.ClusterKey(id))
	if err != nil {
		return storeErr(err)
	}
	if kv == nil {
		return status.Errorf(codes.NotFound, "cluster %q is not registered: register again and republish every export", id)
	}
	return nil
}

func (r *Registry) PutExport(ctx context.Context, req *registryv1.PutExportRequest) (*registryv1.PutExportResponse, error) {
	e := req.GetExport()
	errs := validate.Export(e, field.NewPath("export"))
	if err := invalid(append(errs, validate.ChunksWithExport(e, req.GetChunks(), field.NewPath("chunks"))...)); err != nil {
		return nil, err
	}
	if err := auth.RequireCluster(ctx, e.GetKey().GetClusterId()); err != nil {
		return nil, err
	}
	if err := r.requireRegistered(ctx, e.GetKey().GetClusterId()); err != nil {
		return nil, err
	}
	k := e.GetKey()
	ctx, span, traceParent := r.startWrite(ctx, keys.SpanPutExport, e.GetTraceParent(), attribute.String(keys.AttributeCluster, k.GetClusterId()),
		attribute.String(keys.AttributeNamespace, k.GetNamespace()), attribute.String(keys.AttributeService, k.GetName()))
	e = proto.Clone(e).(*registryv1.Export)
	e.Revision = 0 // output only
	e.TraceParent = traceParent
	normalize(e)
	b, _ := proto.Marshal(e)
	if len(req.GetChunks()) == 0 {
		rev, err := r.store.Put(ctx, keyspace.ExportKey(e.GetKey()), b, 0)
		tracing.End(span, err)
		if err != nil {
			return nil, storeErr(err)
		}
		return &registryv1.PutExportResponse{Revision: rev}, nil
	}
	// The export and its chunks in one transaction: importers see the new
	// export with its endpoints in one event, not an empty import first.
	kvs := []store.KV{{Key: keyspace.ExportKey(e.GetKey()), Value: b}}
	for _, c := range req.GetChunks() {
		cb, _ := proto.Marshal(registryv1.WithTraceParent(c, traceParent))
		kvs = append(kvs, store.KV{Key: keyspace.ChunkKey(c.GetKey()), Value: cb})
	}
	rev, err := r.store.PutAll(ctx, kvs)
	tracing.End(span, err)
	if err != nil {
		return nil, storeErr(err)
	}
	return &registryv1.PutExportResponse{Revision: rev, ChunksWritten: int32(len(req.GetChunks()))}, nil
}

func (r *Registry) DeleteExport(ctx context.Context, req *registryv1.DeleteExportRequest) (*registryv1.DeleteExportResponse, error) {
	if err := invalid(validate.ExportKey(req.GetKey(), field.NewPath("key"))); err != nil {
		return nil, err
	}
	if err := auth.RequireCluster(ctx, req.GetKey().GetClusterId()); err != nil {
		return nil, err
	}
	deleted, rev, err := r.store.Delete(ctx, keyspace.ExportKey(req.GetKey()), req.GetIfRevision())
	if err != nil {
		return nil, storeErr(err)
	}
	if deleted || req.GetIfRevision() == 0 {
		// The endpoints go with the export.
		if rev, err = r.store.DeletePrefix(ctx, keyspace.ExportEndpointsPrefix(req.GetKey())); err != nil {
			return nil, storeErr(err)
		}
	}
	return &registryv1.DeleteExportResponse{Deleted: deleted, Revision: rev}, nil
}

func (r *Registry) PutEndpoints(ctx context.Context, req *registryv1.PutEndpointsRequest) (*registryv1.PutEndpointsResponse, error) {
	c := req.GetChunk()
	if err := invalid(validate.Chunk(c, field.NewPath("chunk"))); err != nil {
		return nil, err
	}
	if err := auth.RequireCluster(ctx, c.GetKey().GetClusterId()); err != nil {
		return nil, err
	}
	if err := r.requireRegistered(ctx, c.GetKey().GetClusterId()); err != nil {
		return nil, err
	}
	k := c.GetKey()
	ctx, span, traceParent := r.startWrite(ctx, keys.SpanPutEndpoints, c.GetTraceParent(), attribute.String(keys.AttributeCluster, k.GetClusterId()),
		attribute.String(keys.AttributeNamespace, k.GetNamespace()), attribute.String(keys.AttributeService, k.GetName()), attribute.String(keys.AttributeChunk, k.GetChunk()))
	b, _ := proto.Marshal(registryv1.WithTraceParent(c, traceParent))
	rev, err := r.store.Put(ctx, keyspace.ChunkKey(c.GetKey()), b, 0)
	tracing.End(span, err)
	if err != nil {
		return nil, storeErr(err)
	}
	return &registryv1.PutEndpointsResponse{Revision: rev}, nil
}

func (r *Registry) DeleteEndpoints(ctx context.Context, req *registryv1.DeleteEndpointsRequest) (*registryv1.DeleteEndpointsResponse, error) {
	if err := invalid(validate.ChunkKey(req.GetKey(), field.NewPath("key"))); err != nil {
		return nil, err
	}
	if err := auth.RequireCluster(ctx, req.GetKey().GetClusterId()); err != nil {
		return nil, err
	}
	deleted, rev, err := r.store.Delete(ctx, keyspace.ChunkKey(req.GetKey()), req.GetIfRevision())
	if err != nil {
		return nil, storeErr(err)
	}
	return &registryv1.DeleteEndpointsResponse{Deleted: deleted, Revision: rev}, nil
}

func (r *Registry) ListClusters(ctx context.Context, _ *registryv1.ListClustersRequest) (*registryv1.ListClustersResponse, error) {
	resp := &registryv1.ListClustersResponse{}
	err := r.currentView(ctx, func(v *view.View) {
		resp.Clusters, resp.Revision = v.Clusters(), v.Revision()
	})
	return resp, storeErrOrNil(err)
}

func (r *Registry) ListExports(ctx context.Context, req *registryv1.ListExportsRequest) (*registryv1.ListExportsResponse, error) {
	cluster := req.GetClusterId()
	if cluster == "" {
		cluster = "*"
	}
	resp := &registryv1.ListExportsResponse{}
	viewer := scopedViewer(ctx)
	err := r.currentView(ctx, func(v *view.View) {
		// A cluster sees its own records, and others' where their export's
		// scope includes it; an administrator sees everything.
		visible := func(namespace, name, exporter string) bool {
			return viewer == "" || exporter == viewer || v.ChunkAudience(namespace, name, exporter).Includes(viewer)
		}
		for _, e := range v.Exports(cluster) {
			if k := e.GetKey(); visible(k.GetNamespace(), k.GetName(), k.GetClusterId()) {
				resp.Exports = append(resp.Exports, e)
			}
		}
		for _, st := range v.ExportStatuses(cluster) {
			k := st.GetKey()
			if !visible(k.GetNamespace(), k.GetName(), k.GetClusterId()) {
				continue
			}
			// Another exporter's conflicts are among the exports it sees,
			// which may include some scoped away from the viewer: the
			// viewer reads its conflicts from its own import instead.
			if viewer != "" && k.GetClusterId() != viewer && len(st.GetConflicts()) > 0 {
				st = proto.CloneOf(st)
				st.Conflicts = nil
			}
			resp.Statuses = append(resp.Statuses, st)
		}
		resp.Revision = v.Revision()
		if req.GetIncludeEndpoints() {
			for _, c := range v.Chunks(cluster) {
				if k := c.GetKey(); visible(k.GetNamespace(), k.GetName(), k.GetClusterId()) {
					resp.Endpoints = append(resp.Endpoints, c)
				}
			}
		}
	})
	return resp, storeErrOrNil(err)
}

func (r *Registry) ListImports(ctx context.Context, req *registryv1.ListImportsRequest) (*registryv1.ListImportsResponse, error) {
	resp := &registryv1.ListImportsResponse{}
	// A cluster lists what it is sent; an administrator everything, or
	// what cluster_id is sent.
	viewer := scopedViewer(ctx)
	if viewer == "" {
		viewer = req.GetClusterId()
	}
	err := r.currentView(ctx, func(v *view.View) {
		if viewer == "" {
			resp.Imports = v.Imports()
		} else {
			resp.Imports = v.ImportsFor(viewer)
		}
		resp.Revision = v.Revision()
	})
	return resp, storeErrOrNil(err)
}

// scopedViewer is the cluster whose exports' scopes limit what the caller
// is sent (fleetnet.dev/export-to); view.Admins (empty) for an
// administrator, who sees every export. The role alone makes an
// administrator, never the name: a caller of another role without a name
// (auth refuses every nameless identity) is unnamedViewer, whom no scope
// includes.
func scopedViewer(ctx context.Context) string {
	id, ok := auth.FromContext(ctx)
	if ok && id.Role == auth.RoleAdmin {
		return view.Admins
	}
	if id.Name == view.Admins {
		return unnamedViewer
	}
	return id.Name
}

// unnamedViewer stands for a caller that is neither an administrator nor
// named: no cluster has this id (it is no RFC 1123 label).
const unnamedViewer = "(unnamed)"

func storeErrOrNil(err error) error {
	if err == nil {
		return nil
	}
	return storeErr(err)
}

// Watch sends a snapshot (or, on resume, what the client missed), a synced
// mark, then every change. A watcher that falls behind is ended with
// Unavailable and resumes from the last revision it received. A watch past
// the caller's cap, or the registry's, is refused with ResourceExhausted.
func (r *Registry) Watch(req *registryv1.WatchRequest, stream grpc.ServerStreamingServer[registryv1.WatchEvent]) error {
	ctx := stream.Context()
	id, _ := auth.FromContext(ctx)
	statusCluster := req.GetExportStatusClusterId()
	if statusCluster != "" {
		if id.Role != auth.RoleAdmin && (id.Role != auth.RoleCluster || id.Name != statusCluster) {
			return status.Errorf(codes.PermissionDenied, "%s may not watch the export status of cluster %q", id, statusCluster)
		}
	}
	var namespaces map[string]bool
	if ns := req.GetNamespaces(); len(ns) > 0 {
		if errs := validate.Namespaces(ns, field.NewPath("namespaces")); len(errs) > 0 {
			return status.Error(codes.InvalidArgument, errs.ToAggregate().Error())
		}
		namespaces = map[string]bool{}
		for _, n := range ns {
			namespaces[n] = true
		}
	}
	release, refused, err := r.watches.acquire(id)
	if err != nil {
		r.metrics.watchesRefused.WithLabelValues(string(refused)).Inc()
		r.log.Debug("watch refused", "identity", id.String(), "limit", string(refused))
		return err
	}
	defer release()
	if err := r.currentView(ctx, func(*view.View) {}); err != nil {
		return storeErr(err)
	}
	r.mu.Lock()
	rev := r.view.Revision()
	w, replay, resumed := r.hub.subscribe(statusCluster, scopedViewer(ctx), namespaces, req.GetResumeRevision(), rev)
	var first []*encoded
	if resumed {
		first = append(replay, encode(&registryv1.WatchEvent{Revision: rev, Event: &registryv1.WatchEvent_Synced{Synced: &registryv1.Synced{}}}))
	} else {
		for _, e := range r.snapshots.snapshot(r.view, statusCluster) {
			if w.wants(e) {
				first = append(first, e)
			}
		}
	}
	r.mu.Unlock()
	defer r.hub.unsubscribe(w)
	r.metrics.watchers.Set(float64(r.hub.count()))
	defer func() { r.metrics.watchers.Set(float64(r.hub.count())) }()

	// Events go out encoded (see codec): SendMsg, not Send.
	// Each is marked when another of its revision follows (sendable): a
	// take holds whole revisions, the hub queues them all or none.
	for i, e := range first {
		if err := stream.SendMsg(sendable(e, at(first, i+1))); err != nil {
			return err
		}
	}
	var batch []*encoded
	sendQueued := func() error {
		batch = w.take(batch)
		for i, e := range batch {
			if err := stream.SendMsg(sendable(e, at(batch, i+1))); err != nil {
				return err
			}
			w.written(e)
		}
		clear(batch) // written: nothing of them is kept
		return nil
	}
	for {
		select {
		case <-w.ready:
			if err := sendQueued(); err != nil {
				return err
			}
		case <-w.cut:
			// Send what was queued before the cut, then end.
			if err := sendQueued(); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "watch ended by the registry: resume from the last revision received")
		case <-r.shutdown:
			return status.Error(codes.Unavailable, "registry shutting down: resume from the last revision received")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// at returns events[i], or nil past the end.
func at(events []*encoded, i int) *encoded {
	if i < len(events) {
		return events[i]
	}
	return nil
}

// normalize spells out the API defaults, so that an export that leaves a
// field empty never conflicts with one that states the default.
func normalize(e *registryv1.Export) {
	if e.SessionAffinity == "" {
		e.SessionAffinity = "None"
	}
	if e.InternalTrafficPolicy == "" {
		e.InternalTrafficPolicy = "Cluster"
	}
	slices.Sort(e.ExportTo)
	if e.ExportToSelector != "" {
		if sel, err := validate.Selector(e.ExportToSelector); err == nil {
			e.ExportToSelector = sel.String() // canonical: one record per scope
		}
	}
}
