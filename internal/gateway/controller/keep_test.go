package controller

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/fleetnet/fleetnet/internal/gateway/lastaccepted"
	"github.com/fleetnet/fleetnet/internal/gateway/model"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// countingStore counts the writes it is asked for.
type countingStore struct {
	lastaccepted.Memory
	puts, deletes int
}

func (s *countingStore) Put(ctx context.Context, key string, la model.LastAccepted) error {
	s.puts++
	return s.Memory.Put(ctx, key, la)
}

func (s *countingStore) Delete(ctx context.Context, key string) error {
	s.deletes++
	return s.Memory.Delete(ctx, key)
}

// The kept specs are written when an object's accepted generation
// changes, deleted when it goes, at most maxKeepWrites a reconcile, and
// what a new leader loads is what was kept.
func TestKeepWritesWhatChanged(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{}
	r := &Reconciler{LastAccepted: store, Log: slog.New(slog.DiscardHandler)}
	if err := r.loadKept(ctx); err != nil {
		t.Fatal(err)
	}
	spec := func(gen int64) model.LastAccepted {
		return model.LastAccepted{UID: "u", Generation: gen, Gateway: &gwv1.GatewaySpec{GatewayClassName: "fleetnet"}}
	}
	want := map[string]model.LastAccepted{}
	for i := range maxKeepWrites + 5 {
		want[model.LastAcceptedKey(model.KindGateway, "demo", fmt.Sprintf("gw-%02d", i))] = spec(1)
	}
	steps := []struct {
		name          string
		edit          func()
		puts, deletes int
		more          bool
	}{
		{"first reconcile: bounded", func() {}, maxKeepWrites, 0, true},
		{"the rest", func() {}, 5, 0, false},
		{"nothing changed", func() {}, 0, 0, false},
		{"one new generation", func() { want[model.LastAcceptedKey(model.KindGateway, "demo", "gw-03")] = spec(2) }, 1, 0, false},
		{"one gone", func() { delete(want, model.LastAcceptedKey(model.KindGateway, "demo", "gw-04")) }, 0, 1, false},
	}
	for _, s := range steps {
		store.puts, store.deletes = 0, 0
		s.edit()
		more, err := r.keep(ctx, want)
		if err != nil || more != s.more || store.puts != s.puts || store.deletes != s.deletes {
			t.Errorf("%s: keep = %v, %v with %d puts and %d deletes; want %v with %d and %d", s.name, more, err, store.puts, store.deletes, s.more, s.puts, s.deletes)
		}
	}

	leader := &Reconciler{LastAccepted: store, Log: slog.New(slog.DiscardHandler)}
	if err := leader.loadKept(ctx); err != nil {
		t.Fatal(err)
	}
	if len(leader.kept) != len(want) || leader.kept[model.LastAcceptedKey(model.KindGateway, "demo", "gw-03")].Generation != 2 {
		t.Errorf("a new leader loads %d specs (gw-03 at generation %d), want %d", len(leader.kept), leader.kept[model.LastAcceptedKey(model.KindGateway, "demo", "gw-03")].Generation, len(want))
	}
}
