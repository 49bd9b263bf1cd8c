// Package store is the registry's storage: a small revisioned key-value
// interface with leases and watches, shaped after etcd's, with a memory
// implementation for tests and an etcd implementation for production. The
// registry keeps no state of its own outside a Store, so any number of
// registry replicas on one etcd serve the same view.
package store

import (
	"context"
	"errors"
)

// LeaseID names a lease. Zero means no lease.
type LeaseID int64

// KV is a stored key and value.
type KV struct {
	Key   string
	Value []byte
	// ModRevision is the revision of the last write to the key.
	ModRevision int64
	// Lease, when set, removes the key when the lease expires.
	Lease LeaseID
}

// EventType says what happened to a key.
type EventType int

const (
	// EventPut is a create or update.
	EventPut EventType = iota
	// EventDelete is a delete, explicit or by lease expiry.
	EventDelete
)

// Event is one change to one key.
type Event struct {
	Type EventType
	// KV holds the key and, for a put, the new value; Value is nil for a
	// delete. ModRevision is the revision of the change.
	KV KV
}

// WatchResponse is every change of one or more revisions, in order.
type WatchResponse struct {
	Events []Event
	// Progress, set on a response without events, says that every change
	// up to this revision has been sent (etcd's progress notification): a
	// store that others write too moves on without events of the prefix.
	Progress int64
	// Err ends the watch: ErrCompacted when the start revision is gone.
	Err error
}

// Errors a Store returns.
var (
	// ErrCompacted: the revision a watch starts from is no longer held.
	ErrCompacted = errors.New("store: revision compacted")
	// ErrLeaseNotFound: the lease expired or never existed.
	ErrLeaseNotFound = errors.New("store: lease not found")
)

// Store is a revisioned key-value store. Every write advances the revision
// by one; a delete of a missing key writes nothing.
type Store interface {
	// Get returns the value of key, or nil, and the current revision.
	Get(ctx context.Context, key string) (*KV, int64, error)
	// List returns every key with prefix, sorted, and the current revision.
	List(ctx context.Context, prefix string) ([]KV, int64, error)
	// Put writes key, bound to lease when it is not zero.
	Put(ctx context.Context, key string, value []byte, lease LeaseID) (int64, error)
	// PutAll writes every key in one transaction: one revision, and one
	// watch response that holds them all. Leases are not taken: the
	// registry's records that go together (an export and its endpoints)
	// have none.
	PutAll(ctx context.Context, kvs []KV) (int64, error)
	// Delete removes key. When ifRevision is not zero, it deletes only if the
	// key's ModRevision is ifRevision. It reports whether it deleted.
	Delete(ctx context.Context, key string, ifRevision int64) (bool, int64, error)
	// DeletePrefix removes every key with prefix in one revision.
	DeletePrefix(ctx context.Context, prefix string) (int64, error)
	// Watch streams changes to keys with prefix after revision fromRevision.
	// The channel closes when ctx ends or after a response with Err.
	Watch(ctx context.Context, prefix string, fromRevision int64) <-chan WatchResponse
	// GrantLease creates a lease that expires after ttlSeconds.
	GrantLease(ctx context.Context, ttlSeconds int64) (LeaseID, error)
	// KeepAlive renews a lease; ErrLeaseNotFound when it expired.
	KeepAlive(ctx context.Context, id LeaseID) error
	// Revision returns the current revision.
	Revision(ctx context.Context) (int64, error)
	// RequestProgress asks for a response with Progress on the store's
	// watches, so that a watcher learns the current revision when changes
	// outside its prefix moved it.
	RequestProgress(ctx context.Context) error
	// Close releases the store's resources.
	Close() error
}
