// Package v1 is the wire contract of fleetnet-discovery's HTTP API
// (/v1/): the JSON types it serves and accepts, the keys it reads from
// client certificates, and the OpenAPI document that describes both
// (openapi.yaml, served at /v1/openapi.yaml). Every type here is plain data;
// the server, the Go client and the tests share them so that the document,
// the server and the client cannot drift apart unnoticed.
package v1

import (
	_ "embed"
	"strconv"
	"time"
)

// OpenAPI is the OpenAPI 3 document of the API, as served at
// /v1/openapi.yaml. Tests validate the server's responses against it.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Pool is a named set of endpoints (namespace/name) across the fleet,
// grouped by the cluster that holds them.
type Pool struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Labels are the pool's own labels; list filters select on them.
	Labels map[string]string `json:"labels,omitempty"`
	// Revision is the revision of the pool's last change.
	Revision int64 `json:"revision"`
	// Clusters are sorted by cluster name.
	Clusters []PoolCluster `json:"clusters"`
}

// PoolCluster is one cluster's members of a pool.
type PoolCluster struct {
	Cluster string `json:"cluster"`
	Region  string `json:"region,omitempty"`
	// Endpoints are sorted by instance id.
	Endpoints []Endpoint `json:"endpoints"`
}

// Endpoint is one member of a pool.
type Endpoint struct {
	// InstanceID is stable for the life of the instance and unique within
	// a pool's cluster. The registry source gives the exporting Pod's name
	// (else the address); the kubernetes source <cluster>/<address>, as
	// imported EndpointSlices refer to no Pod; the memory source what the
	// registrant gave.
	InstanceID string   `json:"instanceID"`
	Addresses  []string `json:"addresses"`
	// Ports are sorted by name.
	Ports []Port `json:"ports,omitempty"`
	// Ready, Serving and Terminating mean what they mean in an
	// EndpointSlice: a router sends new work to ready endpoints, may finish
	// work on serving ones, and should drain terminating ones.
	Ready       bool   `json:"ready"`
	Serving     bool   `json:"serving"`
	Terminating bool   `json:"terminating"`
	Hostname    string `json:"hostname,omitempty"`
	Zone        string `json:"zone,omitempty"`
}

// Port is a named port of an endpoint.
type Port struct {
	Name     string `json:"name"`
	Port     int32  `json:"port"`
	Protocol string `json:"protocol"`
}

// PoolList is the answer of GET /v1/pools.
type PoolList struct {
	// Revision is the store's revision the list reflects: a watch from it
	// sees every later change.
	Revision int64 `json:"revision"`
	// Synced is false while the pool source has not yet loaded everything
	// (after a restart of the memory source, until the first registration
	// or the grace period); the list may then miss pools.
	Synced bool   `json:"synced"`
	Pools  []Pool `json:"pools"`
}

// Router is a replica of the client-side router deployment itself, so that
// routers can find each other.
type Router struct {
	InstanceID string   `json:"instanceID"`
	Addresses  []string `json:"addresses"`
	Ports      []Port   `json:"ports,omitempty"`
	Cluster    string   `json:"cluster,omitempty"`
	Region     string   `json:"region,omitempty"`
	Zone       string   `json:"zone,omitempty"`
	Ready      bool     `json:"ready"`
}

// RouterList is the answer of GET /v1/routers.
type RouterList struct {
	Routers []Router `json:"routers"`
}

// EventType says what a watch event carries.
type EventType string

// Watch event types, in the order a watch may send them.
const (
	// EventReset: the requested revision is older than the kept history;
	// a fresh snapshot follows. Drop everything known.
	EventReset EventType = "reset"
	// EventSnapshot carries one pool of a snapshot; its revision is the
	// pool's. A snapshot's pools replace what the client had only at the
	// synced mark that ends it.
	EventSnapshot EventType = "snapshot"
	// EventSynced ends a snapshot; its revision is the snapshot's, the one
	// to resume from.
	EventSynced EventType = "synced"
	// EventUpsert carries a whole pool that was added or changed.
	EventUpsert EventType = "upsert"
	// EventDelete carries the namespace and name of a pool that is gone, or
	// that no longer matches the watch's filter.
	EventDelete EventType = "delete"
	// EventBookmark carries no pool: every change up to its revision has
	// been sent (or filtered out). Sent when the stream is idle, so that a
	// client can resume from it and notice a dead connection.
	EventBookmark EventType = "bookmark"
)

// Event is one element of a watch stream: a line of newline-delimited JSON,
// or the data of a server-sent event whose event name is the type and whose
// id is the revision to resume from (set only where resuming is safe).
type Event struct {
	Type     EventType `json:"type"`
	Revision int64     `json:"revision"`
	Pool     *Pool     `json:"pool,omitempty"`
}

// Registration is a set of a pool's members in one cluster, kept while its
// lease is renewed (memory source).
type Registration struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Cluster   string `json:"cluster"`
	Region    string `json:"region,omitempty"`
	// Labels become the pool's labels; where registrations of one pool
	// disagree on a key, the oldest registration's value is served.
	Labels    map[string]string      `json:"labels,omitempty"`
	Endpoints []RegistrationEndpoint `json:"endpoints"`
	// TTLSeconds is how long the registration lives without a renewal;
	// zero takes the server's --lease-ttl.
	TTLSeconds int64 `json:"ttlSeconds,omitempty"`
}

// RegistrationEndpoint is an endpoint as registered: readiness may be left
// out, and then means ready (as in an EndpointSlice, where a nil ready is
// ready), serving defaulting to ready.
type RegistrationEndpoint struct {
	InstanceID  string   `json:"instanceID"`
	Addresses   []string `json:"addresses"`
	Ports       []Port   `json:"ports,omitempty"`
	Ready       *bool    `json:"ready,omitempty"`
	Serving     *bool    `json:"serving,omitempty"`
	Terminating bool     `json:"terminating,omitempty"`
	Hostname    string   `json:"hostname,omitempty"`
	Zone        string   `json:"zone,omitempty"`
}

// Lease is the server's answer to a registration or renewal.
type Lease struct {
	// ID names the registration in PUT and DELETE /v1/registrations/{id}.
	ID         string    `json:"id"`
	Namespace  string    `json:"namespace"`
	Name       string    `json:"name"`
	Cluster    string    `json:"cluster"`
	TTLSeconds int64     `json:"ttlSeconds"`
	ExpiresAt  time.Time `json:"expiresAt"`
	// Revision is the store's revision once the registration was applied.
	Revision int64 `json:"revision"`
}

// Error is the body of every 4xx and 5xx answer of /v1/. Field and Value
// name what was wrong with the request, when one field was.
type Error struct {
	Field   string `json:"field,omitempty"`
	Value   string `json:"value,omitempty"`
	Message string `json:"message"`
}

// Error makes a field error usable as a Go error by the server and the
// client.
func (e *Error) Error() string {
	switch {
	case e.Field != "" && e.Value != "":
		return e.Field + "=" + strconv.Quote(e.Value) + ": " + e.Message
	case e.Field != "":
		return e.Field + ": " + e.Message
	}
	return e.Message
}

// Client certificate organizations the server maps to roles (the common
// name is the caller's name). Certificates of fleet administrators
// (keys.OrganizationAdmins) get the register role, those of member clusters
// (keys.OrganizationClusters) the read role.
const (
	// OrganizationRead marks a certificate that may read pools, routers and
	// the watch.
	OrganizationRead = "fleetnet:discovery-read"
	// OrganizationRegister marks a certificate that may also register,
	// renew and deregister pool members.
	OrganizationRegister = "fleetnet:discovery-register"
)

// Roles of bearer tokens (the third column of --tokens-file).
const (
	RoleRead     = "read"
	RoleRegister = "register"
)
