package subscribe_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/distribute"
	"github.com/fleetnet/fleetnet/internal/edge/subscribe"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/internal/version"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

const contentType = "application/vnd.fleetnet.model.v1+json"

// gateway is a distribution server on loopback with the fleet's mTLS.
type gateway struct {
	*distribute.Server
	addr string
	grpc *grpc.Server
}

type fleetCA struct {
	ca      *pki.KeyPair
	serving *pki.KeyPair
}

func newCA(t *testing.T) *fleetCA {
	t.Helper()
	ca, err := pki.NewCA("fleet")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.ServingCert("gateway", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return &fleetCA{ca: ca, serving: serving}
}

// startGateway serves srv on addr ("127.0.0.1:0" for any port).
func startGateway(t *testing.T, ca *fleetCA, srv *distribute.Server, addr string) *gateway {
	t.Helper()
	cert, err := ca.serving.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pki.ServerTLS(cert, ca.ca.CertPEM, true)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
	edgev1.RegisterModelDistributionServer(g, srv)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return &gateway{Server: srv, addr: lis.Addr().String(), grpc: g}
}

// dataPlane records what an edge was given to serve.
type dataPlane struct {
	mu      sync.Mutex
	applied []string
	refuse  string // content refused with an error
	partly  string // content served without a listener
}

func (d *dataPlane) apply(_ context.Context, u *edgev1.ModelUpdate) ([]*edgev1.Refusal, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if string(u.GetModel()) == d.refuse {
		return nil, fmt.Errorf("route 3: unsupported filter")
	}
	d.applied = append(d.applied, string(u.GetModel()))
	if string(u.GetModel()) == d.partly {
		return []*edgev1.Refusal{{Kind: edgev1.RefusalKindGateway, Namespace: "demo", Name: "web", Listener: "metrics", Port: 9090,
			Reason: "listening on port 9090: address already in use"}}, nil
	}
	return nil, nil
}

func (d *dataPlane) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.applied)
}

// startEdge runs a subscribing edge named name until the test ends.
func startEdge(t *testing.T, ca *fleetCA, addr, name, region, stateDir string, dp *dataPlane) *subscribe.Client {
	t.Helper()
	conn := dial(t, ca, addr, func() (*pki.KeyPair, error) { return ca.ca.EdgeCert(name) })
	c := &subscribe.Client{Conn: conn, Region: region, StateDir: stateDir, Apply: dp.apply, RetryMax: 200 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

func dial(t *testing.T, ca *fleetCA, addr string, cert func() (*pki.KeyPair, error)) *grpc.ClientConn {
	t.Helper()
	kp, err := cert()
	if err != nil {
		t.Fatal(err)
	}
	tc, err := kp.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pki.ClientTLS(ca.ca.CertPEM, &tc)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func programmed(g *gateway, want int64) func(context.Context) error {
	return func(context.Context) error {
		v, edges := g.Status()
		if v != want || !distribute.Programmed(v, edges) {
			return fmt.Errorf("not programmed: %s", distribute.Summary(v, edges, time.Now()))
		}
		return nil
	}
}

func TestModelsReachEdgesAndAreAcknowledged(t *testing.T) {
	ca := newCA(t)
	g := startGateway(t, ca, distribute.NewServer(nil), "127.0.0.1:0")
	eu, us := &dataPlane{}, &dataPlane{refuse: "v2"}
	startEdge(t, ca, g.addr, "edge-eu", "eu", "", eu)
	usClient := startEdge(t, ca, g.addr, "edge-us", "us", "", us)

	if v := g.Publish(contentType, []byte("v1"), nil); v != 1 {
		t.Fatalf("first version = %d", v)
	}
	// Programmed needs every connected edge; wait until both are.
	testkit.Eventually(t, 10*time.Second, "version 1 on both edges", func(context.Context) error {
		v, edges := g.Status()
		if got := distribute.Summary(v, edges, time.Now()); got != "model version 1 served by 2 of 2 connected edges" {
			return errors.New(got)
		}
		return nil
	})

	// The same content is not a new version and is not sent again.
	if v := g.Publish(contentType, []byte("v1"), nil); v != 1 {
		t.Errorf("republishing the same model made version %d", v)
	}

	// edge-us refuses version 2 and keeps serving version 1.
	g.Publish(contentType, []byte("v2"), nil)
	testkit.Eventually(t, 10*time.Second, "edge-us refuses version 2", func(context.Context) error {
		v, edges := g.Status()
		if s := distribute.Summary(v, edges, time.Now()); !strings.Contains(s, "served by 1 of 2 connected edges; edge-us refused it: route 3: unsupported filter") {
			return errors.New(s)
		}
		return nil
	})
	if v, edges := g.Status(); distribute.Programmed(v, edges) {
		t.Error("programmed while an edge refused the model")
	}
	if got := string(usClient.Serving().GetModel()); got != "v1" {
		t.Errorf("edge-us serves %q after refusing v2, want v1", got)
	}
	if eu.count() != 2 || us.count() != 1 {
		t.Errorf("applied: eu %v, us %v; want two and one", eu.applied, us.applied)
	}

	// A good version 3 reaches both.
	g.Publish(contentType, []byte("v3"), nil)
	testkit.Eventually(t, 10*time.Second, "version 3 on both edges", programmed(g, 3))
}

func TestEdgeKeepsServingWhileTheGatewayIsAwayAndResumes(t *testing.T) {
	ca := newCA(t)
	g := startGateway(t, ca, distribute.NewServer(nil), "127.0.0.1:0")
	dp := &dataPlane{}
	edge := startEdge(t, ca, g.addr, "edge-eu", "eu", "", dp)
	g.Publish(contentType, []byte("v1"), nil)
	testkit.Eventually(t, 10*time.Second, "version 1", programmed(g, 1))

	g.grpc.Stop()
	time.Sleep(300 * time.Millisecond) // a few reconnect attempts fail meanwhile
	if got := string(edge.Serving().GetModel()); got != "v1" {
		t.Fatalf("edge serves %q while the gateway is away, want v1", got)
	}

	// A new gateway process (versions start again) with the same model:
	// the edge already serves it, so nothing is sent or applied again.
	g2 := startGateway(t, ca, distribute.NewServer(nil), g.addr)
	g2.Publish(contentType, []byte("v1"), nil)
	testkit.Eventually(t, 10*time.Second, "the new gateway sees version 1 served", programmed(g2, 1))
	if dp.count() != 1 {
		t.Errorf("applied %v, want the model once", dp.applied)
	}
	g2.Publish(contentType, []byte("v2"), nil)
	testkit.Eventually(t, 10*time.Second, "version 2 after the reconnect", programmed(g2, 2))
}

// A model the data plane serves without a part (a listener it cannot
// bind) is acknowledged as served, naming the part; a gateway the edge
// reconnects to learns it from the Hello, without sending the model again.
func TestPartsServedWithoutReachTheGateway(t *testing.T) {
	ca := newCA(t)
	g := startGateway(t, ca, distribute.NewServer(nil), "127.0.0.1:0")
	dp := &dataPlane{partly: "v1"}
	startEdge(t, ca, g.addr, "edge-eu", "eu", "", dp)
	g.Publish(contentType, []byte("v1"), nil)
	want := "model version 1 served by 1 of 1 connected edges; edge-eu serves it without listener metrics of Gateway demo/web (port 9090)"
	without := func(g *gateway) func(context.Context) error {
		return func(context.Context) error {
			v, edges := g.Status()
			if got := distribute.Summary(v, edges, time.Now()); got != want {
				return errors.New(got)
			}
			if len(edges) != 1 || len(edges[0].Without) != 1 || !strings.Contains(edges[0].Without[0].GetReason(), "address already in use") {
				return fmt.Errorf("edges %+v", edges)
			}
			return nil
		}
	}
	testkit.Eventually(t, 10*time.Second, "version 1 served without the listener", without(g))
	if v, edges := g.Status(); !distribute.Programmed(v, edges) {
		t.Error("a model served without a part is not programmed: the rest of it is")
	}

	g.grpc.Stop()
	g2 := startGateway(t, ca, distribute.NewServer(nil), g.addr)
	g2.Publish(contentType, []byte("v1"), nil)
	testkit.Eventually(t, 10*time.Second, "the new gateway learns the part from the Hello", without(g2))
	if dp.count() != 1 {
		t.Errorf("applied %v, want the model once", dp.applied)
	}
}

func TestRestartedEdgeServesItsLastGoodModelWithoutTheGateway(t *testing.T) {
	ca := newCA(t)
	state := t.TempDir()
	g := startGateway(t, ca, distribute.NewServer(nil), "127.0.0.1:0")
	startEdge(t, ca, g.addr, "edge-eu", "eu", state, &dataPlane{refuse: "bad"})
	g.Publish(contentType, []byte("good"), nil)
	testkit.Eventually(t, 10*time.Second, "good served", programmed(g, 1))
	g.Publish(contentType, []byte("bad"), nil) // refused: must not replace the kept model
	testkit.Eventually(t, 10*time.Second, "bad refused", func(context.Context) error {
		v, edges := g.Status()
		if len(edges) != 1 || edges[0].Refused == "" {
			return errors.New(distribute.Summary(v, edges, time.Now()))
		}
		return nil
	})
	g.grpc.Stop()

	// A new edge process, the gateway gone.
	dp := &dataPlane{}
	restarted := &subscribe.Client{Apply: dp.apply, StateDir: state}
	ok, err := restarted.Restore(context.Background())
	if err != nil || !ok {
		t.Fatalf("Restore = %v, %v", ok, err)
	}
	if dp.count() != 1 || dp.applied[0] != "good" || restarted.Serving().GetVersion() != 1 {
		t.Errorf("restored %v (version %d), want the last good model", dp.applied, restarted.Serving().GetVersion())
	}
	empty := &subscribe.Client{Apply: dp.apply, StateDir: t.TempDir()}
	if ok, err := empty.Restore(context.Background()); ok || err != nil {
		t.Errorf("Restore of an empty state directory = %v, %v", ok, err)
	}
}

func TestOnlyEdgesMaySubscribe(t *testing.T) {
	ca := newCA(t)
	g := startGateway(t, ca, distribute.NewServer(nil), "127.0.0.1:0")
	conn := dial(t, ca, g.addr, func() (*pki.KeyPair, error) { return ca.ca.ClusterCert("east") })
	s, err := edgev1.NewModelDistributionClient(conn).Stream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Send(&edgev1.EdgeMessage{Message: &edgev1.EdgeMessage_Hello{Hello: &edgev1.Hello{}}})
	_, err = s.Recv()
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `"east" is not an edge's`) {
		t.Errorf("a cluster's certificate: %v, want PermissionDenied naming it", err)
	}
}

func TestSummary(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		version    int64
		edges      []distribute.EdgeStatus
		want       string
		programmed bool
	}{
		{"nothing published", 0, nil, "no model published yet", false},
		{"no edge", 3, nil, "model version 3: no edge connected", false},
		{"one waiting", 7, []distribute.EdgeStatus{
			{Name: "edge-eu", Connected: true, Serving: 6, WaitingSince: now.Add(-12 * time.Second)},
			{Name: "edge-us", Connected: true, Serving: 7},
		}, "model version 7 served by 1 of 2 connected edges; edge-eu waiting since 12s", false},
		{"an edge away does not hold the others up", 7, []distribute.EdgeStatus{
			{Name: "edge-ap", Serving: 5, Since: now.Add(-3 * time.Minute)},
			{Name: "edge-us", Connected: true, Serving: 7},
		}, "model version 7 served by 1 of 1 connected edges; edge-ap disconnected 3m0s ago, serving version 5", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := distribute.Summary(tt.version, tt.edges, now); got != tt.want {
				t.Errorf("Summary = %q, want %q", got, tt.want)
			}
			if got := distribute.Programmed(tt.version, tt.edges); got != tt.programmed {
				t.Errorf("Programmed = %v", got)
			}
		})
	}
}

// TestEdgesOutsideTheSkewPolicyAreRefused: an edge of a later release, or
// one that announces what is not a version, is refused at its Hello with
// both versions named; one from before announcements is served, and a
// subscribing edge's status carries its version.
func TestEdgesOutsideTheSkewPolicyAreRefused(t *testing.T) {
	ca := newCA(t)
	g := startGateway(t, ca, distribute.NewServer(nil), "127.0.0.1:0")
	g.Publish(contentType, []byte("m1"), nil)
	this := version.Get().Version
	for _, tc := range []struct{ announced, wantErr string }{
		{"v9.0.0", "fleetnet-edge e1 v9.0.0 is not supported by this server at " + this},
		{"latest", `"latest" is not a semantic version`},
		{"", ""},
	} {
		conn := dial(t, ca, g.addr, func() (*pki.KeyPair, error) { return ca.ca.EdgeCert("e1") })
		s, err := edgev1.NewModelDistributionClient(conn).Stream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Send(&edgev1.EdgeMessage{Message: &edgev1.EdgeMessage_Hello{Hello: &edgev1.Hello{Version: tc.announced}}})
		update, err := s.Recv()
		if tc.wantErr == "" {
			if err != nil || string(update.GetModel()) != "m1" {
				t.Errorf("an edge announcing %q: %v, %q; want the model", tc.announced, err, update.GetModel())
			}
			continue
		}
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "docs/upgrades.md") {
			t.Errorf("an edge announcing %q: %v, want FailedPrecondition with %q and the policy", tc.announced, err, tc.wantErr)
		}
	}

	dp := &dataPlane{}
	startEdge(t, ca, g.addr, "e2", "west", "", dp)
	testkit.Eventually(t, 10*time.Second, "e2 listed with its version", func(context.Context) error {
		_, edges := g.Status()
		for _, e := range edges {
			if e.Name == "e2" && e.Connected && e.Version == this {
				return nil
			}
		}
		return fmt.Errorf("edges %+v, want e2 connected at %s", edges, this)
	})
}
