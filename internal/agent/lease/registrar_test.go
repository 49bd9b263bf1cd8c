package lease

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	clocktesting "k8s.io/utils/clock/testing"
)

// registryDown answers renewals with Unavailable between down and up (on
// the fake clock) and records when each renewal came.
type registryDown struct {
	registryv1.RegistryClient
	clock    *clocktesting.FakeClock
	down, up time.Time

	mu       sync.Mutex
	renewals []time.Time
}

func (f *registryDown) RegisterCluster(context.Context, *registryv1.RegisterClusterRequest, ...grpc.CallOption) (*registryv1.RegisterClusterResponse, error) {
	return &registryv1.RegisterClusterResponse{LeaseTtlSeconds: 30}, nil
}

func (f *registryDown) RenewLease(context.Context, *registryv1.RenewLeaseRequest, ...grpc.CallOption) (*registryv1.RenewLeaseResponse, error) {
	now := f.clock.Now()
	f.mu.Lock()
	f.renewals = append(f.renewals, now)
	f.mu.Unlock()
	if !now.Before(f.down) && now.Before(f.up) {
		return nil, status.Error(codes.Unavailable, "connection refused")
	}
	return &registryv1.RenewLeaseResponse{}, nil
}

// A registry that is away for several TTLs must be renewed with as soon as
// it is back, within a third of the TTL: it restores leases with a full TTL
// when it restarts, and a longer backoff would let them expire and withdraw
// the cluster's exports everywhere.
func TestRenewalRetriesWithinAThirdOfTheTTL(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	fake := &registryDown{clock: clk, down: start.Add(time.Minute), up: start.Add(4 * time.Minute)}
	var (
		recoveriesMu sync.Mutex
		recoveries   []time.Time
	)
	r := &Registrar{
		Client: fake, Cluster: &registryv1.Cluster{Id: "east"}, Clock: clk,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Rand: rand.New(rand.NewPCG(1, 2)),
		OnRecovered: func(context.Context) {
			recoveriesMu.Lock()
			defer recoveriesMu.Unlock()
			recoveries = append(recoveries, clk.Now())
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	for clk.Now().Before(start.Add(6 * time.Minute)) {
		testkit.Until(t, 5*time.Second, "the registrar to wait on the clock", clk.HasWaiters)
		clk.Step(100 * time.Millisecond)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	var backAt time.Time
	for i, at := range fake.renewals {
		if i > 0 {
			if gap := at.Sub(fake.renewals[i-1]); gap > 12*time.Second {
				t.Errorf("renewal at %s came %s after the one before; want at most a third of the 30s TTL (+20%% jitter)", at.Sub(start), gap)
			}
		}
		if backAt.IsZero() && !at.Before(fake.up) {
			backAt = at
		}
	}
	if backAt.IsZero() || backAt.Sub(fake.up) > 10*time.Second {
		t.Errorf("first renewal after the registry came back at %s: %s late, want within 10s", backAt.Sub(start), backAt.Sub(fake.up))
	}
	if !r.Registered() {
		t.Error("the registrar lost its registration over Unavailable errors")
	}
	// One outage, one recovery, reported with the first renewal after it.
	recoveriesMu.Lock()
	defer recoveriesMu.Unlock()
	if len(recoveries) != 1 || !recoveries[0].Equal(backAt) {
		t.Errorf("OnRecovered ran at %v, want once, at the first renewal after the registry came back (%s)", recoveries, backAt.Sub(start))
	}
}
