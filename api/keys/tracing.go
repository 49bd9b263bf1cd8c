package keys

// Trace span names and attribute keys (OpenTelemetry) of an export's path
// through the fleet: the exporting agent's publish, the registry's write
// and fan-out, each importing agent's apply
// (docs/decisions/0131-export-path-traces.md).
const (
	// SpanPublish is an agent's publish of one export and its endpoint
	// chunks to the registry (only when something is written).
	SpanPublish = "agent.publish"
	// SpanPutExport is the registry's write of an export record.
	SpanPutExport = "registry.put_export"
	// SpanPutEndpoints is the registry's write of an endpoint chunk.
	SpanPutEndpoints = "registry.put_endpoints"
	// SpanFanout is the registry's hand-over of one watch event (an
	// import or a chunk that a traced write changed) to its watchers.
	SpanFanout = "registry.fanout"
	// SpanApplyImport is an importing agent's reconcile of one import
	// (ServiceImport, derived Service, EndpointSlices) after the registry
	// sent a traced change of it.
	SpanApplyImport = "agent.apply_import"

	// AttributeCluster is the cluster a span concerns: the exporting
	// cluster for a publish or a write, the importing one for an apply.
	AttributeCluster = "fleetnet.cluster"
	// AttributeNamespace and AttributeService name the exported Service.
	AttributeNamespace = "fleetnet.namespace"
	AttributeService   = "fleetnet.service"
	// AttributeChunk names an endpoint chunk (its source EndpointSlice).
	AttributeChunk = "fleetnet.chunk"
	// AttributeWrites counts the registry writes of a publish.
	AttributeWrites = "fleetnet.writes"
	// AttributeWatchers counts the watchers a fan-out reached.
	AttributeWatchers = "fleetnet.watchers"
	// AttributeEvent is the kind of a fan-out's watch event:
	// import_upsert or endpoints_upsert.
	AttributeEvent = "fleetnet.event"
	// ResourceClusterID is the resource attribute naming an agent's
	// cluster (the service.name is the binary's).
	ResourceClusterID = "fleetnet.cluster.id"
)
