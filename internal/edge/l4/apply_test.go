package l4_test

import (
	"net"
	"strings"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// Models the edge cannot serve are refused with an error naming what
// conflicts, and the model served before goes on.
func TestApplyRefuses(t *testing.T) {
	east := startTCP(t, "east-1")
	served, other := int32(testkit.FreePort(t)), int32(testkit.FreePort(t))
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Close() })
	busyPort := int32(busy.Addr().(*net.TCPAddr).Port)
	ep := cluster("east", 1, east.endpoint())
	withListener := func(port int32, lbs ...edgev1.LoadBalancer) *edgev1.Model {
		m := modelOf("bad", lbs...)
		m.Gateways = []edgev1.Gateway{{Namespace: "web", Name: "edge", Listeners: []edgev1.Listener{{Name: "http", Port: port, Protocol: edgev1.ProtocolHTTP}}}}
		return m
	}
	tests := []struct {
		name  string
		model *edgev1.Model
		want  []string
	}{
		{"a TCP port of a Gateway listener", withListener(other, lb("db", other, edgev1.ProtocolTCP, ep)),
			[]string{"MultiClusterLoadBalancer demo/db", "listener http of Gateway web/edge", "both serve it"}},
		{"two load balancers on one port", modelOf("bad", lb("a", other, edgev1.ProtocolTCP, ep), lb("b", other, edgev1.ProtocolTCP, ep)),
			[]string{"demo/a and demo/b both serve it"}},
		{"a port out of range", modelOf("bad", lb("db", 70000, edgev1.ProtocolTCP, ep)), []string{"port 70000 is not between 1 and 65535"}},
		{"a port another process holds", modelOf("bad", lb("db", busyPort, edgev1.ProtocolTCP, ep), lb("other", other, edgev1.ProtocolTCP, ep)),
			[]string{"MultiClusterLoadBalancer demo/db", "address already in use"}},
	}
	p, _ := newProxy(t, nil)
	if err := p.Apply(modelOf("1", lb("served", served, edgev1.ProtocolTCP, ep))); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.Apply(tt.model)
			if err == nil {
				t.Fatal("applied")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if name, err := once(served); err != nil || name != "east-1" {
				t.Errorf("the model served before: %q %v", name, err)
			}
			if p.Addr(other, edgev1.ProtocolTCP) != nil {
				t.Errorf("port %d of the refused model is bound", other)
			}
		})
	}
	// A UDP port beside a Gateway listener's TCP port is no conflict.
	if err := p.Apply(withListener(other, lb("dns", other, edgev1.ProtocolUDP, ep))); err != nil {
		t.Errorf("UDP beside a TCP listener: %v", err)
	}
}

// Load balancers of another class are left to their provider; a port of
// a protocol this edge does not know is left out, not a refusal.
func TestApplyLeavesOut(t *testing.T) {
	east := startTCP(t, "east-1")
	a, b, c := int32(testkit.FreePort(t)), int32(testkit.FreePort(t)), int32(testkit.FreePort(t))
	azure := lb("azure", a, edgev1.ProtocolTCP, cluster("east", 1, east.endpoint()))
	azure.Class = "azure-cross-region"
	sctp := lb("sctp", b, "SCTP", cluster("east", 1, east.endpoint()))
	tcp := lb("db", c, edgev1.ProtocolTCP, cluster("east", 1, east.endpoint()))
	p, _ := newProxy(t, nil)
	if err := p.Apply(modelOf("1", azure, tcp, sctp)); err != nil {
		t.Fatal(err)
	}
	if p.Addr(a, edgev1.ProtocolTCP) != nil || p.Addr(b, "SCTP") != nil {
		t.Error("a port of another class or protocol is bound")
	}
	if name, err := once(c); err != nil || name != "east-1" {
		t.Errorf("%q %v", name, err)
	}
}

// Prepare leaves traffic alone until Commit: a port handed over by the
// HTTP proxy is bound by Commit, a port handed to it stops accepting in
// Prepare, and Abort puts it back.
func TestPrepareHandOver(t *testing.T) {
	east := startTCP(t, "east-1")
	mine, theirs := int32(testkit.FreePort(t)), int32(testkit.FreePort(t))
	p, _ := newProxy(t, nil)
	ep := cluster("east", 1, east.endpoint())
	if err := p.Apply(modelOf("1", lb("db", mine, edgev1.ProtocolTCP, ep))); err != nil {
		t.Fatal(err)
	}
	// The HTTP proxy holds theirs; the next model gives mine to a Gateway
	// listener and theirs to the load balancer.
	httpLn, err := net.Listen("tcp", addr(theirs))
	if err != nil {
		t.Fatal(err)
	}
	next := modelOf("2", lb("db", theirs, edgev1.ProtocolTCP, ep))
	next.Gateways = []edgev1.Gateway{{Namespace: "web", Name: "edge", Listeners: []edgev1.Listener{{Name: "http", Port: mine, Protocol: edgev1.ProtocolHTTP}}}}
	held := func(port int32) bool { return port == theirs }

	change, err := p.Prepare(next, held)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Prepare(next, held); err == nil {
		t.Error("a second change while one is pending")
	}
	if _, err := net.DialTimeout("tcp", addr(mine), time.Second); err == nil {
		t.Error("the port given to HTTP still accepts after Prepare")
	}
	change.Abort()
	if name, err := once(mine); err != nil || name != "east-1" {
		t.Fatalf("after Abort: %q %v", name, err)
	}

	change, err = p.Prepare(next, held)
	if err != nil {
		t.Fatal(err)
	}
	if err := change.Commit(); err == nil {
		t.Fatal("Commit bound a port the HTTP proxy still holds")
	}
	_ = httpLn.Close() // the HTTP proxy applies the model
	if err := change.Commit(); err != nil {
		t.Fatal(err)
	}
	if name, err := once(theirs); err != nil || name != "east-1" {
		t.Fatalf("the port handed over: %q %v", name, err)
	}
	ln, err := net.Listen("tcp", addr(mine))
	if err != nil {
		t.Fatalf("the port handed to HTTP is not free: %v", err)
	}
	_ = ln.Close()
}

// Prepare leaves out a port it cannot bind, names it, and the change
// serves the model's other ports: one load balancer's port in use does
// not hold up every other update.
func TestPrepareLeavesOutAPortInUse(t *testing.T) {
	east := startTCP(t, "east-1")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Close() })
	busyPort, free := int32(busy.Addr().(*net.TCPAddr).Port), int32(testkit.FreePort(t))
	ep := cluster("east", 1, east.endpoint())
	p, _ := newProxy(t, nil)

	change, err := p.Prepare(modelOf("1", lb("busy", busyPort, edgev1.ProtocolTCP, ep), lb("db", free, edgev1.ProtocolTCP, ep)), nil)
	if err != nil {
		t.Fatalf("Prepare refused the model: %v", err)
	}
	refused := change.Refused()
	if len(refused) != 1 || refused[0].LoadBalancer != "demo/busy" || refused[0].Port != busyPort || refused[0].Protocol != edgev1.ProtocolTCP ||
		!strings.Contains(refused[0].Error(), "address already in use") {
		t.Fatalf("Refused = %v, want demo/busy's port %d in use", refused, busyPort)
	}
	if err := change.Commit(); err != nil {
		t.Fatal(err)
	}
	if name, err := once(free); err != nil || name != "east-1" {
		t.Errorf("the other load balancer: %q %v", name, err)
	}
	if p.Addr(busyPort, edgev1.ProtocolTCP) != nil {
		t.Error("the port in use is the proxy's")
	}
}
