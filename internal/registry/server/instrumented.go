package server

import (
	"context"

	"github.com/fleetnet/fleetnet/internal/registry/store"
	"github.com/prometheus/client_golang/prometheus"
)

// instrumentedStore counts store operations by result.
type instrumentedStore struct {
	store.Store
	ops *prometheus.CounterVec
}

func (s instrumentedStore) count(op string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	s.ops.WithLabelValues(op, result).Inc()
}

func (s instrumentedStore) Get(ctx context.Context, key string) (*store.KV, int64, error) {
	kv, rev, err := s.Store.Get(ctx, key)
	s.count("get", err)
	return kv, rev, err
}

func (s instrumentedStore) List(ctx context.Context, prefix string) ([]store.KV, int64, error) {
	kvs, rev, err := s.Store.List(ctx, prefix)
	s.count("list", err)
	return kvs, rev, err
}

func (s instrumentedStore) Put(ctx context.Context, key string, value []byte, lease store.LeaseID) (int64, error) {
	rev, err := s.Store.Put(ctx, key, value, lease)
	s.count("put", err)
	return rev, err
}

func (s instrumentedStore) PutAll(ctx context.Context, kvs []store.KV) (int64, error) {
	rev, err := s.Store.PutAll(ctx, kvs)
	s.count("put_all", err)
	return rev, err
}

func (s instrumentedStore) Delete(ctx context.Context, key string, ifRevision int64) (bool, int64, error) {
	ok, rev, err := s.Store.Delete(ctx, key, ifRevision)
	s.count("delete", err)
	return ok, rev, err
}

func (s instrumentedStore) DeletePrefix(ctx context.Context, prefix string) (int64, error) {
	rev, err := s.Store.DeletePrefix(ctx, prefix)
	s.count("delete_prefix", err)
	return rev, err
}

func (s instrumentedStore) KeepAlive(ctx context.Context, id store.LeaseID) error {
	err := s.Store.KeepAlive(ctx, id)
	s.count("keepalive", err)
	return err
}

func (s instrumentedStore) GrantLease(ctx context.Context, ttl int64) (store.LeaseID, error) {
	id, err := s.Store.GrantLease(ctx, ttl)
	s.count("grant_lease", err)
	return id, err
}
