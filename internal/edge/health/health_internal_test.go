package health

import (
	"net"
	"strconv"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// The health of a unit through a script of active check results and
// passive events, with HealthyThreshold 2 and UnhealthyThreshold 2.
func TestTargetStates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		at  time.Duration // since t0
		do  string        // ok, fail, connect (failed to connect), 5xx, 2xx
		up  bool          // healthy after the step
		why string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"active check out and back", []step{
			{0, "fail", true, "one failure is not enough"},
			{1, "ok", true, "a success resets the failures"},
			{2, "fail", true, ""},
			{3, "fail", false, "two in a row"},
			{4, "ok", false, "one success is not enough"},
			{5, "ok", true, "two in a row"},
		}},
		{"a failed connection ejects at once; successes after it bring back", []step{
			{0, "ok", true, ""},
			{1, "connect", false, ""},
			{2, "ok", false, ""},
			{3, "ok", true, ""},
		}},
		{"5xx in a row eject for the ejection time", []step{
			{0, "5xx", true, ""},
			{0, "2xx", true, "an answer below 500 resets the count"},
			{0, "5xx", true, ""},
			{0, "5xx", true, ""},
			{0, "5xx", false, "three in a row"},
			{5 * time.Second, "ok", false, "within the ejection time"},
			{9 * time.Second, "ok", false, ""},
			{10 * time.Second, "ok", false, "the first success after it"},
			{11 * time.Second, "ok", true, "the second"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var now time.Time
			tg := &Target{key: Key{Check: edgev1.HealthCheck{HealthyThreshold: 2, UnhealthyThreshold: 2}}, wake: make(chan struct{}, 1),
				now: func() time.Time { return now }}
			for i, s := range tt.steps {
				now = t0.Add(s.at)
				switch s.do {
				case "ok", "fail":
					tg.observe(s.do == "ok", now)
				case "connect":
					tg.FailedToConnect()
				case "5xx", "2xx":
					tg.Answered(s.do == "5xx", 3, 10*time.Second)
				}
				if tg.Healthy() != s.up {
					t.Errorf("step %d (%s at %s, %s): healthy %v, want %v", i, s.do, s.at, s.why, tg.Healthy(), s.up)
				}
			}
		})
	}
}

// Two sets (the HTTP proxy's and the L4 proxy's) share the unit of an
// endpoint they check alike; it is checked while either holds it.
func TestSetsShareUnits(t *testing.T) {
	c := New()
	t.Cleanup(c.Close)
	check := edgev1.DefaultBackendPolicy().HealthCheck
	other := check
	other.IntervalMillis = 2000
	k1 := Key{Address: "127.0.0.1", Port: 1, Check: check}
	k2 := Key{Address: "127.0.0.1", Port: 2, Check: check}
	k1other := Key{Address: "127.0.0.1", Port: 1, Check: other}
	track := func(s *Set, keys ...Key) map[Key]*Target {
		got := map[Key]*Target{}
		s.Track(func(unit func(Key) *Target) {
			for _, k := range keys {
				got[k] = unit(k)
				if unit(k) != got[k] {
					t.Errorf("a second ask for %v gave another unit", k)
				}
			}
		})
		return got
	}
	httpSet, l4Set := c.NewSet(), c.NewSet()
	h := track(httpSet, k1, k1other)
	l := track(l4Set, k1, k2)
	switch {
	case h[k1] != l[k1]:
		t.Fatal("the same check of the same endpoint is two units")
	case h[k1] == h[k1other]:
		t.Fatal("another check of the same endpoint shares its unit")
	case c.Units() != 3:
		t.Fatalf("%d units, want 3", c.Units())
	}
	h[k1].Eject(time.Time{})
	track(httpSet, k1other) // the HTTP proxy no longer has k1
	if c.Units() != 3 || l4Set.held[k1] != l[k1] || l[k1].Healthy() {
		t.Fatalf("k1 is still the L4 set's and keeps its state: %d units, healthy %v", c.Units(), l[k1].Healthy())
	}
	l4Set.Release()
	if c.Units() != 1 {
		t.Fatalf("%d units after the L4 set's release, want 1", c.Units())
	}
	if _, ok := c.targets[k2]; ok {
		t.Fatal("k2 is still checked")
	}
}

// A TCP check takes a stopped endpoint out and brings it back when it
// listens again.
func TestTCPCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	c := New()
	t.Cleanup(c.Close)
	s := c.NewSet()
	var tg *Target
	s.Track(func(unit func(Key) *Target) {
		tg = unit(Key{Address: "127.0.0.1", Port: int32(addr.Port), Check: edgev1.HealthCheck{
			Type: edgev1.HealthCheckTCP, IntervalMillis: 20, TimeoutMillis: 10, HealthyThreshold: 1, UnhealthyThreshold: 1}})
	})
	_ = ln.Close()
	testkit.Until(t, 10*time.Second, "the stopped endpoint is out", func() bool { return !tg.Healthy() })
	ln, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(addr.Port)))
	if err != nil {
		t.Fatalf("listening again on port %d, the checked endpoint's: %v", addr.Port, err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	testkit.Until(t, 10*time.Second, "the endpoint is back", tg.Healthy)
}
