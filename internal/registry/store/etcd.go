package store

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Etcd is a Store on an etcd cluster. Keys live under a prefix, so several
// fleets can share one etcd.
type Etcd struct {
	client *clientv3.Client
	prefix string
}

var _ Store = (*Etcd)(nil)

// NewEtcd uses client with every key under prefix. Close closes the client.
func NewEtcd(client *clientv3.Client, prefix string) *Etcd {
	return &Etcd{client: client, prefix: prefix}
}

func (e *Etcd) Get(ctx context.Context, key string) (*KV, int64, error) {
	resp, err := e.client.Get(ctx, e.prefix+key)
	if err != nil {
		return nil, 0, fmt.Errorf("etcd get %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, resp.Header.Revision, nil
	}
	kv := e.kv(resp.Kvs[0].Key, resp.Kvs[0].Value, resp.Kvs[0].ModRevision, resp.Kvs[0].Lease)
	return &kv, resp.Header.Revision, nil
}

func (e *Etcd) List(ctx context.Context, prefix string) ([]KV, int64, error) {
	resp, err := e.client.Get(ctx, e.prefix+prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, 0, fmt.Errorf("etcd list %s: %w", prefix, err)
	}
	out := make([]KV, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, e.kv(kv.Key, kv.Value, kv.ModRevision, kv.Lease))
	}
	return out, resp.Header.Revision, nil
}

func (e *Etcd) Put(ctx context.Context, key string, value []byte, lease LeaseID) (int64, error) {
	var opts []clientv3.OpOption
	if lease != 0 {
		opts = append(opts, clientv3.WithLease(clientv3.LeaseID(lease)))
	}
	resp, err := e.client.Put(ctx, e.prefix+key, string(value), opts...)
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return 0, ErrLeaseNotFound
		}
		return 0, fmt.Errorf("etcd put %s: %w", key, err)
	}
	return resp.Header.Revision, nil
}

func (e *Etcd) PutAll(ctx context.Context, kvs []KV) (int64, error) {
	ops := make([]clientv3.Op, 0, len(kvs))
	for _, kv := range kvs {
		ops = append(ops, clientv3.OpPut(e.prefix+kv.Key, string(kv.Value)))
	}
	resp, err := e.client.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("etcd put of %d keys from %s: %w", len(kvs), kvs[0].Key, err)
	}
	return resp.Header.Revision, nil
}

func (e *Etcd) Delete(ctx context.Context, key string, ifRevision int64) (bool, int64, error) {
	k := e.prefix + key
	if ifRevision == 0 {
		resp, err := e.client.Delete(ctx, k)
		if err != nil {
			return false, 0, fmt.Errorf("etcd delete %s: %w", key, err)
		}
		return resp.Deleted > 0, resp.Header.Revision, nil
	}
	resp, err := e.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", ifRevision)).
		Then(clientv3.OpDelete(k)).
		Commit()
	if err != nil {
		return false, 0, fmt.Errorf("etcd conditional delete %s: %w", key, err)
	}
	return resp.Succeeded, resp.Header.Revision, nil
}

func (e *Etcd) DeletePrefix(ctx context.Context, prefix string) (int64, error) {
	resp, err := e.client.Delete(ctx, e.prefix+prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("etcd delete prefix %s: %w", prefix, err)
	}
	return resp.Header.Revision, nil
}

func (e *Etcd) Watch(ctx context.Context, prefix string, fromRevision int64) <-chan WatchResponse {
	out := make(chan WatchResponse)
	go func() {
		defer close(out)
		ctx, cancel := context.WithCancel(watchContext(ctx))
		defer cancel()
		wc := e.client.Watch(ctx, e.prefix+prefix, clientv3.WithPrefix(), clientv3.WithRev(fromRevision+1))
		for resp := range wc {
			var wr WatchResponse
			switch {
			case resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted):
				wr.Err = ErrCompacted
			case resp.Err() != nil:
				wr.Err = fmt.Errorf("etcd watch %s: %w", prefix, resp.Err())
			case resp.IsProgressNotify():
				wr.Progress = resp.Header.Revision
			default:
				for _, ev := range resp.Events {
					t := EventPut
					if ev.Type == clientv3.EventTypeDelete {
						t = EventDelete
					}
					wr.Events = append(wr.Events, Event{Type: t, KV: e.kv(ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision, ev.Kv.Lease)})
				}
			}
			if len(wr.Events) == 0 && wr.Err == nil && wr.Progress == 0 {
				continue
			}
			select {
			case out <- wr:
			case <-ctx.Done():
				return
			}
			if wr.Err != nil {
				return
			}
		}
		if ctx.Err() == nil {
			select {
			case out <- WatchResponse{Err: errors.New("etcd watch ended")}:
			case <-ctx.Done():
			}
		}
	}()
	return out
}

// watchContext is the context of the store's watches. etcd groups a
// client's watches in gRPC streams by the context's metadata, and a
// progress request reaches the watches of one stream: RequestProgress
// uses the same metadata.
func watchContext(ctx context.Context) context.Context { return clientv3.WithRequireLeader(ctx) }

// RequestProgress asks etcd for a progress notification on every watch.
func (e *Etcd) RequestProgress(ctx context.Context) error {
	if err := e.client.RequestProgress(watchContext(ctx)); err != nil {
		return fmt.Errorf("etcd progress request: %w", err)
	}
	return nil
}

func (e *Etcd) GrantLease(ctx context.Context, ttlSeconds int64) (LeaseID, error) {
	resp, err := e.client.Grant(ctx, ttlSeconds)
	if err != nil {
		return 0, fmt.Errorf("etcd grant lease: %w", err)
	}
	return LeaseID(resp.ID), nil
}

func (e *Etcd) KeepAlive(ctx context.Context, id LeaseID) error {
	_, err := e.client.KeepAliveOnce(ctx, clientv3.LeaseID(id))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return ErrLeaseNotFound
	}
	if err != nil {
		return fmt.Errorf("etcd keep lease %d alive: %w", id, err)
	}
	return nil
}

func (e *Etcd) Revision(ctx context.Context) (int64, error) {
	// A Get of one missing key is the cheapest read that returns the
	// cluster's current revision.
	resp, err := e.client.Get(ctx, e.prefix+"\x00revision", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("etcd revision: %w", err)
	}
	return resp.Header.Revision, nil
}

func (e *Etcd) Close() error { return e.client.Close() }

func (e *Etcd) kv(key, value []byte, modRev, lease int64) KV {
	return KV{Key: string(key)[len(e.prefix):], Value: value, ModRevision: modRev, Lease: LeaseID(lease)}
}
