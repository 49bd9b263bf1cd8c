package store_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/registry/store"
	"k8s.io/utils/clock"
)

// stores returns each Store implementation, fresh, for the shared suite.
func stores(t *testing.T) map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
		"memory": func(t *testing.T) store.Store {
			m := store.NewMemory(clock.RealClock{}, 1000)
			t.Cleanup(func() { m.Close() })
			return m
		},
		"etcd": func(t *testing.T) store.Store {
			e, err := store.StartEmbedded(context.Background(), t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(e.Close)
			return store.NewEtcd(e.Client, "/test/")
		},
	}
}

func TestStoreSuite(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Run("put get list delete", func(t *testing.T) { testCRUD(t, newStore(t)) })
			t.Run("conditional delete", func(t *testing.T) { testConditionalDelete(t, newStore(t)) })
			t.Run("watch from revision", func(t *testing.T) { testWatch(t, newStore(t)) })
			t.Run("put all in one revision", func(t *testing.T) { testPutAll(t, newStore(t)) })
			t.Run("lease expiry deletes keys", func(t *testing.T) { testLease(t, newStore(t)) })
		})
	}
}

func testCRUD(t *testing.T, s store.Store) {
	ctx := context.Background()
	r1, err := s.Put(ctx, "a/1", []byte("one"), 0)
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := s.Put(ctx, "a/2", []byte("two"), 0)
	s.Put(ctx, "b/1", []byte("other"), 0)
	if r2 <= r1 {
		t.Fatalf("revisions do not advance: %d then %d", r1, r2)
	}
	kv, _, err := s.Get(ctx, "a/1")
	if err != nil || kv == nil || string(kv.Value) != "one" || kv.ModRevision != r1 {
		t.Fatalf("Get = %+v, %v", kv, err)
	}
	kvs, rev, err := s.List(ctx, "a/")
	if err != nil || len(kvs) != 2 || kvs[0].Key != "a/1" || kvs[1].Key != "a/2" || rev < r2 {
		t.Fatalf("List = %+v at %d, %v", kvs, rev, err)
	}
	if missing, _, _ := s.Get(ctx, "a/3"); missing != nil {
		t.Fatalf("Get of a missing key = %+v", missing)
	}
	if ok, _, err := s.Delete(ctx, "a/1", 0); !ok || err != nil {
		t.Fatalf("Delete = %v, %v", ok, err)
	}
	if ok, _, _ := s.Delete(ctx, "a/1", 0); ok {
		t.Fatal("second Delete reported a delete")
	}
	if _, err := s.DeletePrefix(ctx, "a/"); err != nil {
		t.Fatal(err)
	}
	if kvs, _, _ := s.List(ctx, ""); len(kvs) != 1 || kvs[0].Key != "b/1" {
		t.Fatalf("after DeletePrefix: %+v", kvs)
	}
}

func testConditionalDelete(t *testing.T, s store.Store) {
	ctx := context.Background()
	r1, _ := s.Put(ctx, "k", []byte("v1"), 0)
	// Written again meanwhile: a delete conditional on the old revision
	// must not remove the new value.
	s.Put(ctx, "k", []byte("v2"), 0)
	if ok, _, err := s.Delete(ctx, "k", r1); ok || err != nil {
		t.Fatalf("conditional delete of a rewritten key = %v, %v; want no delete", ok, err)
	}
	kv, _, _ := s.Get(ctx, "k")
	if kv == nil || string(kv.Value) != "v2" {
		t.Fatalf("value after refused delete = %+v", kv)
	}
	if ok, _, err := s.Delete(ctx, "k", kv.ModRevision); !ok || err != nil {
		t.Fatalf("conditional delete at the current revision = %v, %v", ok, err)
	}
}

func testWatch(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start, _ := s.Put(ctx, "w/0", []byte("before"), 0)
	r1, _ := s.Put(ctx, "w/1", []byte("x"), 0)
	s.Put(ctx, "other", []byte("ignored"), 0)
	ch := s.Watch(ctx, "w/", start)
	r2, _ := s.Put(ctx, "w/2", []byte("y"), 0)
	_, _, _ = s.Delete(ctx, "w/1", 0)
	var got []store.Event
	timeout := time.After(10 * time.Second)
	for len(got) < 3 {
		select {
		case resp := <-ch:
			if resp.Err != nil {
				t.Fatal(resp.Err)
			}
			got = append(got, resp.Events...)
		case <-timeout:
			t.Fatalf("got %d events, want 3", len(got))
		}
	}
	if got[0].KV.Key != "w/1" || got[0].KV.ModRevision != r1 || got[1].KV.Key != "w/2" || got[1].KV.ModRevision != r2 {
		t.Fatalf("events = %+v", got)
	}
	if got[2].Type != store.EventDelete || got[2].KV.Key != "w/1" {
		t.Fatalf("third event = %+v, want delete of w/1", got[2])
	}
}

// testPutAll: keys written together share one revision and reach a watch
// in one response, which is what lets the registry send an export and its
// endpoints to importers as one event.
func testPutAll(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start, _ := s.Put(ctx, "t/old", []byte("before"), 0)
	ch := s.Watch(ctx, "t/", start)
	rev, err := s.PutAll(ctx, []store.KV{{Key: "t/a", Value: []byte("1")}, {Key: "t/b", Value: []byte("2")}, {Key: "t/old", Value: []byte("3")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"t/a", "t/b", "t/old"} {
		if kv, _, err := s.Get(ctx, k); err != nil || kv == nil || kv.ModRevision != rev {
			t.Fatalf("Get(%s) = %+v, %v; want written at revision %d", k, kv, err, rev)
		}
	}
	select {
	case resp := <-ch:
		if len(resp.Events) != 3 {
			t.Fatalf("first watch response holds %d events, want the 3 written together: %+v", len(resp.Events), resp.Events)
		}
		for _, e := range resp.Events {
			if e.Type != store.EventPut || e.KV.ModRevision != rev {
				t.Fatalf("event %+v: want a put at revision %d", e, rev)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch response after PutAll")
	}
}

func testLease(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lease, err := s.GrantLease(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := s.Put(ctx, "live/a", []byte("1"), lease)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.KeepAlive(ctx, lease); err != nil {
		t.Fatal(err)
	}
	ch := s.Watch(ctx, "live/", rev)
	timeout := time.After(15 * time.Second)
	for deleted := false; !deleted; {
		select {
		case resp := <-ch:
			for _, e := range resp.Events {
				deleted = deleted || (e.Type == store.EventDelete && e.KV.Key == "live/a")
			}
		case <-timeout:
			t.Fatal("lease did not expire")
		}
	}
	if err := s.KeepAlive(ctx, lease); !errors.Is(err, store.ErrLeaseNotFound) {
		t.Fatalf("KeepAlive of an expired lease = %v, want ErrLeaseNotFound", err)
	}
	if _, err := s.Put(ctx, "live/b", nil, lease); !errors.Is(err, store.ErrLeaseNotFound) {
		t.Fatalf("Put with an expired lease = %v, want ErrLeaseNotFound", err)
	}
}

func TestMemoryWatchFromCompactedRevision(t *testing.T) {
	m := store.NewMemory(clock.RealClock{}, 2)
	defer m.Close()
	ctx := context.Background()
	for range 5 {
		m.Put(ctx, "k", []byte("v"), 0)
	}
	resp := <-m.Watch(ctx, "", 1)
	if !errors.Is(resp.Err, store.ErrCompacted) {
		t.Fatalf("watch from a compacted revision: %+v, want ErrCompacted", resp)
	}
}
