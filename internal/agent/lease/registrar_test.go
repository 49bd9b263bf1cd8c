package lease

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
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

// registrations records each registration and answers it, with err when
// set.
type registrations struct {
	registryv1.RegistryClient

	mu   sync.Mutex
	reqs []*registryv1.Cluster
	err  error
}

func (f *registrations) RegisterCluster(_ context.Context, req *registryv1.RegisterClusterRequest, _ ...grpc.CallOption) (*registryv1.RegisterClusterResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req.GetCluster())
	if f.err != nil {
		return nil, f.err
	}
	return &registryv1.RegisterClusterResponse{Cluster: req.GetCluster(), LeaseTtlSeconds: 30}, nil
}

func (f *registrations) RenewLease(context.Context, *registryv1.RenewLeaseRequest, ...grpc.CallOption) (*registryv1.RenewLeaseResponse, error) {
	return &registryv1.RenewLeaseResponse{LeaseTtlSeconds: 30}, nil
}

func (f *registrations) properties() []map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []map[string]string
	for _, c := range f.reqs {
		out = append(out, c.GetProperties())
	}
	return out
}

// Changed properties are registered again at once, without waiting for
// the next renewal and without losing the registration; the same
// properties again change nothing; a registry that refuses them keeps the
// cluster registered with the ones it has.
func TestUpdatePropertiesRegistersAgain(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fake := &registrations{}
	var readBacks atomic.Int32
	r := &Registrar{
		Client: fake, Cluster: &registryv1.Cluster{Id: "east", ClustersetId: "fleet", Properties: map[string]string{"env": "dev"}}, Clock: clk,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Rand: rand.New(rand.NewPCG(1, 2)),
		OnRegistered: func(context.Context) error { readBacks.Add(1); return nil },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	registeredTimes := func(n int) func() bool {
		return func() bool { return len(fake.properties()) == n && r.Registered() }
	}
	testkit.Until(t, 5*time.Second, "the first registration", registeredTimes(1))
	if got := fake.properties()[0]; !maps.Equal(got, map[string]string{"env": "dev"}) {
		t.Fatalf("registered with properties %v, want env=dev", got)
	}

	r.UpdateProperties(map[string]string{"env": "prod"})
	testkit.Until(t, 5*time.Second, "the registration of env=prod", registeredTimes(2))
	if got := fake.properties()[1]; !maps.Equal(got, map[string]string{"env": "prod"}) {
		t.Fatalf("registered again with properties %v, want env=prod", got)
	}
	if n := readBacks.Load(); n != 2 {
		t.Errorf("OnRegistered ran %d times, want 2 (once per registration)", n)
	}
	r.UpdateProperties(map[string]string{"env": "prod"})
	fake.mu.Lock()
	fake.err = status.Error(codes.InvalidArgument, `cluster.properties[env]: Invalid value: "x"`)
	fake.mu.Unlock()
	r.UpdateProperties(map[string]string{"env": "x"})
	testkit.Until(t, 5*time.Second, "the refused registration of env=x", func() bool { return len(fake.properties()) == 3 })
	if got := fake.properties(); !maps.Equal(got[2], map[string]string{"env": "x"}) {
		t.Fatalf("registrations %v: the same properties registered again, or not env=x", got)
	}
	// Refused for good: renewing goes on, registered, not registering again.
	testkit.Until(t, 5*time.Second, "the registrar to wait for the renewal", clk.HasWaiters)
	clk.Step(15 * time.Second)
	testkit.Until(t, 5*time.Second, "the registrar to wait for the next renewal", clk.HasWaiters)
	if !r.Registered() || len(fake.properties()) != 3 {
		t.Errorf("after a refused update: registered %v, %d registrations; want registered, 3", r.Registered(), len(fake.properties()))
	}
}
