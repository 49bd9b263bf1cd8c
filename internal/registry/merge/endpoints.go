package merge

import (
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"google.golang.org/protobuf/proto"
)

// CanonicalChunk returns chunk as importers see it: each endpoint port is
// named as the import names the Service port it serves, and keeps its own
// target port and protocol. An endpoint port whose Service port (found by
// name in the exporter's ports) the import lacks is dropped.
//
// Example: cluster A exports TCP/80 named "http", cluster B exports TCP/80
// named "web" with endpoints on port 9090 named "web". The import has
// "http"/80, and B's endpoints are served under "http" with port 9090.
func CanonicalChunk(imp *registryv1.Import, exp *registryv1.Export, chunk *registryv1.EndpointChunk) *registryv1.EndpointChunk {
	importName := map[portKey]string{}
	for _, p := range imp.GetPorts() {
		importName[keyOf(p)] = p.GetName()
	}
	byName := map[string]*registryv1.ServicePort{}
	for _, p := range exp.GetPorts() {
		byName[p.GetName()] = p
	}
	out := &registryv1.EndpointChunk{
		Key:         proto.Clone(chunk.GetKey()).(*registryv1.ChunkKey),
		AddressType: chunk.GetAddressType(),
		Endpoints:   chunk.GetEndpoints(),
		TraceParent: chunk.GetTraceParent(),
	}
	for _, ep := range chunk.GetPorts() {
		sp, ok := byName[ep.GetName()]
		if !ok {
			continue
		}
		name, ok := importName[keyOf(sp)]
		if !ok {
			continue
		}
		out.Ports = append(out.Ports, &registryv1.EndpointPort{Name: name, Protocol: ep.GetProtocol(), Port: ep.GetPort(), AppProtocol: ep.GetAppProtocol()})
	}
	return out
}
