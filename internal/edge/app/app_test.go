package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/app"
	"github.com/fleetnet/fleetnet/internal/testkit"

	"github.com/fleetnet/fleetnet/internal/gateway/distribute"

	"github.com/fleetnet/fleetnet/internal/pki"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*app.Options)
		want string
	}{
		{"valid", func(*app.Options) {}, ""},
		{"no gateway", func(o *app.Options) { o.Gateway = "" }, "--gateway is required"},
		{"gateway without a port", func(o *app.Options) { o.Gateway = "gw.example" }, `--gateway="gw.example"`},
		{"gateway without a host", func(o *app.Options) { o.Gateway = ":7444" }, `--gateway=":7444": no host`},
		{"bad region", func(o *app.Options) { o.Region = "eu west" }, `--region="eu west"`},
		{"negative header timeout", func(o *app.Options) { o.Clients.ReadHeaderTimeout = -time.Second }, "--client-header-timeout=-1s: must not be negative"},
		{"negative connection cap", func(o *app.Options) { o.Clients.MaxConnections = -1 }, "--max-connections=-1: must not be negative"},
		{"negative L4 connection cap", func(o *app.Options) { o.L4MaxConnections = -1 }, "--l4-max-connections=-1: must not be negative"},
		{"negative L4 cap per client", func(o *app.Options) { o.L4MaxConnectionsPerClient = -2 }, "--l4-max-connections-per-client=-2: must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := app.Options{Gateway: "127.0.0.1:7444", CAFile: "ca.crt", CertFile: "e.crt", KeyFile: "e.key", Region: "eu"}
			tt.mod(&o)
			err := o.Validate()
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}

// The edge process serves what the gateway publishes, keeps serving it
// while the gateway is away, and a restarted edge serves its last good
// model with no gateway at all.
func TestEdgeServesAndKeepsServing(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("fleet")
	if err != nil {
		t.Fatal(err)
	}
	serving, _ := ca.ServingCert("gateway", []string{"127.0.0.1"})
	edge, _ := ca.EdgeCert("edge-eu")
	if err := ca.Write(dir, "ca"); err != nil {
		t.Fatal(err)
	}
	if err := edge.Write(dir, "edge"); err != nil {
		t.Fatal(err)
	}

	// The gateway's distribution server.
	srv := distribute.NewServer(nil)
	servingCert, _ := serving.TLSCertificate()
	tlsCfg, _ := pki.ServerTLS(servingCert, ca.CertPEM, true)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsCfg)))
	edgev1.RegisterModelDistributionServer(g, srv)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)

	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "hello from east") }))
	t.Cleanup(backend.Close)
	host, portStr, _ := net.SplitHostPort(backend.Listener.Addr().String())
	bport, _ := strconv.Atoi(portStr)
	listen := int32(testkit.FreePort(t))
	m := &edgev1.Model{Version: "1", Gateways: []edgev1.Gateway{{Namespace: "demo", Name: "edge", Listeners: []edgev1.Listener{{
		Name: "http", Port: listen, Protocol: edgev1.ProtocolHTTP, VirtualHosts: []edgev1.VirtualHost{{Hostname: "*", Routes: []edgev1.Route{{
			RouteName: "echo", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"},
			Backends: []edgev1.Backend{{Kind: edgev1.KindServiceImport, Namespace: "demo", Name: "echo", Weight: 1, Clusters: []edgev1.ClusterEndpoints{{
				Cluster: "east", Weight: 1, EffectiveWeight: 1, Endpoints: []edgev1.Endpoint{{Address: host, Port: int32(bport), Ready: true, Serving: true}},
			}}}},
		}}}},
	}}}}}
	doc, certs, err := edgev1.EncodeModel(m)
	if err != nil {
		t.Fatal(err)
	}
	srv.Publish(edgev1.ModelContentType, doc, certs)

	opts := app.Options{
		Gateway: lis.Addr().String(), CAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, "edge.crt"), KeyFile: filepath.Join(dir, "edge.key"),
		Region: "eu", StateDir: filepath.Join(dir, "state"), ListenHost: "127.0.0.1",
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t)), HealthAddr: fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t)),
	}
	stop := runEdge(t, opts)
	testkit.Eventually(t, 10*time.Second, "the edge serves the model", func(context.Context) error { return answers(listen, "hello from east") })
	if err := answers(0, ""); err == nil { // sanity: the helper fails on a dead port
		t.Fatal("answers() cannot fail")
	}
	resp, err := http.Get("http://" + opts.HealthAddr + "/readyz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/readyz: %v %v", resp, err)
	}
	resp.Body.Close()

	g.Stop() // the gateway goes away
	time.Sleep(300 * time.Millisecond)
	if err := answers(listen, "hello from east"); err != nil {
		t.Fatalf("with the gateway away: %v", err)
	}
	stop()

	// A new edge process; the gateway is still away.
	runEdge(t, opts)
	testkit.Eventually(t, 10*time.Second, "the restarted edge serves its last good model", func(context.Context) error { return answers(listen, "hello from east") })
}

func runEdge(t *testing.T, o app.Options) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, o, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("edge stopped with %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func answers(port int32, want string) error {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != want {
		return fmt.Errorf("%d %q", resp.StatusCode, body)
	}
	return nil
}
