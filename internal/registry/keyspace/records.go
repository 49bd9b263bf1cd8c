// Package keyspace defines how the registry lays out its records in a Store:
// the key of each kind of record and its encoding (protobuf). Names cannot
// contain "/" (validation ensures it), so keys split back unambiguously.
package keyspace

import (
	"fmt"
	"strconv"
	"strings"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/store"
)

// Key prefixes, one per kind of record.
const (
	// ClustersPrefix holds one registryv1.Cluster per cluster.
	ClustersPrefix = "clusters/"
	// LivePrefix holds one key per live cluster, bound to its lease; the
	// value is the lease id. Lease expiry deletes it.
	LivePrefix = "live/"
	// ExportsPrefix holds registryv1.Export at exports/<ns>/<name>/<cluster>.
	ExportsPrefix = "exports/"
	// EndpointsPrefix holds registryv1.EndpointChunk at
	// endpoints/<ns>/<name>/<cluster>/<chunk>.
	EndpointsPrefix = "endpoints/"
)

// ClusterKey is the key of a cluster record.
func ClusterKey(id string) string { return ClustersPrefix + id }

// LiveKey is the key of a cluster's liveness record.
func LiveKey(id string) string { return LivePrefix + id }

// ExportKey is the key of an export record.
func ExportKey(k *registryv1.ExportKey) string {
	return ExportsPrefix + k.GetNamespace() + "/" + k.GetName() + "/" + k.GetClusterId()
}

// ChunkKey is the key of an endpoint chunk.
func ChunkKey(k *registryv1.ChunkKey) string {
	return EndpointsPrefix + k.GetNamespace() + "/" + k.GetName() + "/" + k.GetClusterId() + "/" + k.GetChunk()
}

// ExportEndpointsPrefix is the prefix of every chunk of one export.
func ExportEndpointsPrefix(k *registryv1.ExportKey) string {
	return EndpointsPrefix + k.GetNamespace() + "/" + k.GetName() + "/" + k.GetClusterId() + "/"
}

// Kind says which record a key holds.
type Kind int

// Kinds of record.
const (
	KindUnknown Kind = iota
	KindCluster
	KindLive
	KindExport
	KindChunk
)

// Parsed is a key split into its parts.
type Parsed struct {
	Kind      Kind
	ClusterID string
	Export    *registryv1.ExportKey
	Chunk     *registryv1.ChunkKey
}

// Parse splits a key.
func Parse(key string) Parsed {
	switch {
	case strings.HasPrefix(key, ClustersPrefix):
		return Parsed{Kind: KindCluster, ClusterID: key[len(ClustersPrefix):]}
	case strings.HasPrefix(key, LivePrefix):
		return Parsed{Kind: KindLive, ClusterID: key[len(LivePrefix):]}
	case strings.HasPrefix(key, ExportsPrefix):
		p := strings.Split(key[len(ExportsPrefix):], "/")
		if len(p) == 3 {
			return Parsed{Kind: KindExport, ClusterID: p[2], Export: &registryv1.ExportKey{Namespace: p[0], Name: p[1], ClusterId: p[2]}}
		}
	case strings.HasPrefix(key, EndpointsPrefix):
		p := strings.Split(key[len(EndpointsPrefix):], "/")
		if len(p) == 4 {
			return Parsed{Kind: KindChunk, ClusterID: p[2], Chunk: &registryv1.ChunkKey{Namespace: p[0], Name: p[1], ClusterId: p[2], Chunk: p[3]}}
		}
	}
	return Parsed{Kind: KindUnknown}
}

// EncodeLease is the value of a liveness record.
func EncodeLease(id store.LeaseID) []byte { return []byte(strconv.FormatInt(int64(id), 10)) }

// DecodeLease reads a liveness record.
func DecodeLease(v []byte) (store.LeaseID, error) {
	id, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("malformed liveness record %q: %w", v, err)
	}
	return store.LeaseID(id), nil
}
