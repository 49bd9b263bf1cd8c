package memory

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

func ptr[T any](v T) *T { return &v }

func registration(cluster string, ids ...string) discoveryv1.Registration {
	r := discoveryv1.Registration{Namespace: "demo", Name: "echo", Cluster: cluster, Region: "eu-west-1"}
	for i, id := range ids {
		r.Endpoints = append(r.Endpoints, discoveryv1.RegistrationEndpoint{
			InstanceID: id, Addresses: []string{"10.0.0." + string(rune('1'+i))},
			Ports: []discoveryv1.Port{{Name: "http", Port: 8080}},
		})
	}
	return r
}

func newMemory(t *testing.T, grace time.Duration) (*Memory, *store.Store, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	st := store.New(store.Options{})
	return New(Config{Store: st, TTL: 10 * time.Second, Grace: grace, Clock: clk}), st, clk
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name               string
		mod                func(*discoveryv1.Registration)
		field, value, text string
	}{
		{name: "valid", mod: func(*discoveryv1.Registration) {}},
		{"no namespace", func(r *discoveryv1.Registration) { r.Namespace = "" }, "namespace", "", "is required"},
		{"bad name", func(r *discoveryv1.Registration) { r.Name = "Echo_1" }, "name", "Echo_1", "RFC 1123"},
		{"no cluster", func(r *discoveryv1.Registration) { r.Cluster = "" }, "cluster", "", "is required"},
		{"bad region", func(r *discoveryv1.Registration) { r.Region = "eu west" }, "region", "eu west", "alphanumeric"},
		{"bad label key", func(r *discoveryv1.Registration) { r.Labels = map[string]string{"a b": "x"} }, "labels", "a b", "invalid label key"},
		{"bad label value", func(r *discoveryv1.Registration) { r.Labels = map[string]string{"app": "x y"} }, "labels.app", "x y", "alphanumeric"},
		{"negative ttl", func(r *discoveryv1.Registration) { r.TTLSeconds = -1 }, "ttlSeconds", "-1", "from 0"},
		{"ttl too long", func(r *discoveryv1.Registration) { r.TTLSeconds = 3601 }, "ttlSeconds", "3601", "to 3600"},
		{"no endpoints", func(r *discoveryv1.Registration) { r.Endpoints = nil }, "endpoints", "", "at least one"},
		{"no instance id", func(r *discoveryv1.Registration) { r.Endpoints[1].InstanceID = "" }, "endpoints[1].instanceID", "", "is required"},
		{"twice the same instance", func(r *discoveryv1.Registration) { r.Endpoints[1].InstanceID = "p1" }, "endpoints[1].instanceID", "p1", "twice"},
		{"no address", func(r *discoveryv1.Registration) { r.Endpoints[0].Addresses = nil }, "endpoints[0].addresses", "", "at least one"},
		{"bad address", func(r *discoveryv1.Registration) { r.Endpoints[0].Addresses = []string{"10.0.0.1", "echo.local"} }, "endpoints[0].addresses[1]", "echo.local", "not an IPv4 or IPv6"},
		{"bad port name", func(r *discoveryv1.Registration) { r.Endpoints[0].Ports[0].Name = "HTTP" }, "endpoints[0].ports[0].name", "HTTP", "RFC 1123"},
		{"port out of range", func(r *discoveryv1.Registration) { r.Endpoints[0].Ports[0].Port = 70000 }, "endpoints[0].ports[0].port", "70000", "1 to 65535"},
		{"bad protocol", func(r *discoveryv1.Registration) { r.Endpoints[0].Ports[0].Protocol = "tcp" }, "endpoints[0].ports[0].protocol", "tcp", "TCP, UDP or SCTP"},
		{"port name twice", func(r *discoveryv1.Registration) {
			r.Endpoints[0].Ports = append(r.Endpoints[0].Ports, discoveryv1.Port{Name: "http", Port: 9090})
		}, "endpoints[0].ports[1].name", "http", "twice"},
		{"bad hostname", func(r *discoveryv1.Registration) { r.Endpoints[0].Hostname = "a.b" }, "endpoints[0].hostname", "a.b", "must not contain dots"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := registration("east", "p1", "p2")
			tt.mod(&r)
			err := Validate(r)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var fe *discoveryv1.Error
			if !errors.As(err, &fe) {
				t.Fatalf("Validate() = %v, want a *discoveryv1.Error", err)
			}
			if fe.Field != tt.field || fe.Value != tt.value || !strings.Contains(fe.Message, tt.text) {
				t.Errorf("Validate() = %+v, want field %q value %q and a message with %q", fe, tt.field, tt.value, tt.text)
			}
		})
	}
}

// pool returns the served pool as "cluster:instance(ready,serving)..." and
// its labels.
func pool(t *testing.T, st *store.Store) string {
	t.Helper()
	p, ok := st.Get(store.Key{Namespace: "demo", Name: "echo"})
	if !ok {
		return "none"
	}
	s := ""
	for _, c := range p.Clusters {
		s += c.Cluster + "/" + c.Region + ":"
		for _, e := range c.Endpoints {
			s += e.InstanceID
			if e.Ready {
				s += "+"
			}
			if e.Serving {
				s += "s"
			}
			if e.Terminating {
				s += "t"
			}
			s += " "
		}
	}
	for _, k := range slices.Sorted(maps.Keys(p.Labels)) {
		s += " " + k + "=" + p.Labels[k]
	}
	return strings.TrimSpace(s)
}

func TestLifecycle(t *testing.T) {
	m, st, _ := newMemory(t, 0)
	ctx := context.Background()

	east := registration("east", "p1", "p2")
	east.Labels = map[string]string{"app": "echo"}
	east.Endpoints[1].Ready = ptr(false)
	l1, err := m.Register(ctx, "test", east)
	if err != nil {
		t.Fatal(err)
	}
	if l1.ID == "" || l1.TTLSeconds != 10 || l1.Revision != st.Revision() || l1.Cluster != "east" {
		t.Errorf("lease %+v", l1)
	}
	// A nil ready is ready; serving defaults to ready.
	if got, want := pool(t, st), "east/eu-west-1:p1+s p2  app=echo"; got != want {
		t.Errorf("after the first registration: %q, want %q", got, want)
	}

	// A second registrant in the same cluster, and one elsewhere. The
	// oldest registration wins the label and instance p2.
	other := registration("east", "p2", "p3")
	other.Labels = map[string]string{"app": "other", "tier": "web"}
	l2, err := m.Register(ctx, "test", other)
	if err != nil {
		t.Fatal(err)
	}
	west := registration("west", "w1")
	west.Region = "us-east-1"
	l3, err := m.Register(ctx, "test", west)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pool(t, st), "east/eu-west-1:p1+s p2 p3+s west/us-east-1:w1+s  app=echo tier=web"; got != want {
		t.Errorf("after three registrations: %q, want %q", got, want)
	}

	// A renewal with a body replaces the members.
	east.Endpoints[1].Ready, east.Endpoints[1].Terminating = ptr(false), true
	east.Endpoints[1].Serving = ptr(true)
	if _, err := m.Renew(ctx, l1.ID, &east); err != nil {
		t.Fatal(err)
	}
	if got := pool(t, st); !strings.HasPrefix(got, "east/eu-west-1:p1+s p2st p3+s") {
		t.Errorf("after a renewal with members: %q", got)
	}
	// A renewal without one changes nothing served.
	rev := st.Revision()
	if l, err := m.Renew(ctx, l2.ID, nil); err != nil || l.Revision != rev {
		t.Errorf("bare renewal: %+v %v, want revision %d", l, err, rev)
	}
	// A renewal cannot move a registration.
	moved := registration("west", "p1")
	var fe *discoveryv1.Error
	if _, err := m.Renew(ctx, l1.ID, &moved); !errors.As(err, &fe) || fe.Field != "cluster" || fe.Value != "west" {
		t.Errorf("renewal into another cluster: %v", err)
	}

	if err := m.Deregister(ctx, l1.ID); err != nil {
		t.Fatal(err)
	}
	if got := pool(t, st); !strings.HasPrefix(got, "east/eu-west-1:p2+s p3+s west") || !strings.Contains(got, "app=other") {
		t.Errorf("after deregistering the oldest: %q", got)
	}
	for _, id := range []string{l2.ID, l3.ID} {
		if err := m.Deregister(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if got := pool(t, st); got != "none" {
		t.Errorf("after deregistering all: %q", got)
	}
	for name, err := range map[string]error{
		"deregister twice": m.Deregister(ctx, l1.ID),
		"renew unknown":    second(m.Renew(ctx, "nope", nil)),
	} {
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want fs.ErrNotExist", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestExpiry(t *testing.T) {
	reg := prometheus.NewRegistry()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	st := store.New(store.Options{})
	m := New(Config{Store: st, TTL: 10 * time.Second, Clock: clk, Registerer: reg})
	ctx := context.Background()
	short, err := m.Register(ctx, "test", registration("east", "p1"))
	if err != nil {
		t.Fatal(err)
	}
	longReg := registration("west", "w1")
	longReg.TTLSeconds = 60
	long, err := m.Register(ctx, "test", longReg)
	if err != nil {
		t.Fatal(err)
	}
	if want := clk.Now().Add(60 * time.Second); !long.ExpiresAt.Equal(want) {
		t.Errorf("expiresAt %s, want %s", long.ExpiresAt, want)
	}

	clk.Step(9 * time.Second)
	m.Expire()
	if _, err := m.Renew(ctx, short.ID, nil); err != nil {
		t.Fatalf("renewal within the TTL: %v", err)
	}
	clk.Step(9 * time.Second)
	m.Expire()
	if got := pool(t, st); got != "east/eu-west-1:p1+s west/eu-west-1:w1+s" {
		t.Errorf("9s after a renewal: %q", got)
	}
	clk.Step(time.Second)
	// The lease has run out: it cannot be renewed even before the next tick
	// collects it.
	if _, err := m.Renew(ctx, short.ID, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("renewal after expiry: %v, want fs.ErrNotExist", err)
	}
	m.Expire()
	if got := pool(t, st); got != "west/eu-west-1:w1+s" {
		t.Errorf("after expiry: %q", got)
	}
	if got := testutil.ToFloat64(m.expired); got != 1 {
		t.Errorf("expired counter %v, want 1", got)
	}
	clk.Step(time.Minute)
	m.Expire()
	if got := pool(t, st); got != "none" {
		t.Errorf("after the long lease: %q", got)
	}
	if n, err := testutil.GatherAndCount(reg, "fleetnet_discovery_registrations", "fleetnet_discovery_registrations_expired_total"); err != nil || n != 2 {
		t.Errorf("metrics: %d series, %v", n, err)
	}
}

// Run checks leases on its ticker, which the fake clock drives.
func TestRunExpires(t *testing.T) {
	m, st, clk := newMemory(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	if _, err := m.Register(ctx, "test", registration("east", "p1")); err != nil {
		t.Fatal(err)
	}
	// Step until the ticker has fired past the lease.
	testkit.Until(t, 10*time.Second, "the registration to expire", func() bool {
		if pool(t, st) == "none" {
			return true
		}
		clk.Step(time.Second)
		return false
	})
}

func TestReadinessAfterRestart(t *testing.T) {
	t.Run("the first registration", func(t *testing.T) {
		m, _, _ := newMemory(t, 30*time.Second)
		if isClosed(m.Synced()) || !strings.Contains(m.Status(), "no registrations yet") {
			t.Fatalf("a fresh source is synced: %q", m.Status())
		}
		if _, err := m.Register(context.Background(), "test", registration("east", "p1")); err != nil {
			t.Fatal(err)
		}
		if !isClosed(m.Synced()) || m.Status() != "1 registrations" {
			t.Errorf("after a registration: synced %v, %q", isClosed(m.Synced()), m.Status())
		}
	})
	t.Run("the grace period", func(t *testing.T) {
		m, _, clk := newMemory(t, 30*time.Second)
		clk.Step(29 * time.Second)
		m.Expire()
		if isClosed(m.Synced()) {
			t.Fatal("synced before the grace period ended")
		}
		clk.Step(time.Second)
		m.Expire()
		if !isClosed(m.Synced()) {
			t.Error("not synced after the grace period")
		}
	})
	t.Run("no grace period", func(t *testing.T) {
		m, _, _ := newMemory(t, 0)
		if !isClosed(m.Synced()) {
			t.Error("not synced")
		}
	})
}

func TestRoutersSorted(t *testing.T) {
	m := New(Config{Store: store.New(store.Options{}), TTL: time.Second, Routers: []discoveryv1.Router{
		{InstanceID: "r2", Cluster: "west"}, {InstanceID: "r1", Cluster: "west"}, {InstanceID: "r9", Cluster: "east"},
	}})
	var got []string
	for _, r := range m.Routers() {
		got = append(got, r.Cluster+"/"+r.InstanceID)
	}
	if diff := cmp.Diff([]string{"east/r9", "west/r1", "west/r2"}, got); diff != "" {
		t.Errorf("routers (-want +got):\n%s", diff)
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
