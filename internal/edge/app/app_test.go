package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/distribute"
	"github.com/fleetnet/fleetnet/internal/edge/app"
	"github.com/fleetnet/fleetnet/internal/testkit"
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
		{"east-west role without its certificate", func(o *app.Options) { o.EastWestListen = ":15008" }, "--eastwest-listen needs --eastwest-cert-file and --eastwest-key-file"},
		{"east-west address without a port", func(o *app.Options) {
			o.EastWestListen, o.EastWestCertFile, o.EastWestKeyFile = "0.0.0.0", "ew.crt", "ew.key"
		}, `--eastwest-listen="0.0.0.0"`},
		{"east-west certificate without the role", func(o *app.Options) { o.EastWestCertFile = "ew.crt" }, "used with --eastwest-listen only"},
		{"endpoint range not a CIDR", func(o *app.Options) { o.EndpointRanges = []string{"10.244.0.1"} }, `--endpoint-ranges: "10.244.0.1" is not a CIDR range`},
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
	srv, g, opts := startGateway(t)
	opts.StateDir = filepath.Join(t.TempDir(), "state")
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "hello from east") }))
	t.Cleanup(backend.Close)
	listen := int32(testkit.FreePort(t))
	publishModel(t, srv, &edgev1.Model{Version: "1", Gateways: []edgev1.Gateway{httpGateway(t, backend.Listener.Addr().String(), listen)}})

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

// A member cluster that exports an address of the edge's own network (here
// loopback, where the edge's metrics also listen) does not get the edge to
// dial it: outside --endpoint-ranges, the endpoint is left out (503) and
// counted; the same model is served once the ranges allow it.
func TestEndpointsOutsideTheRangesAreNotDialled(t *testing.T) {
	var dialled atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		dialled.Add(1)
		fmt.Fprint(w, "hello from east")
	}))
	t.Cleanup(backend.Close)
	for _, tc := range []struct {
		ranges       []string
		wantStatus   int
		wantWithheld string
	}{
		{ranges: []string{"10.244.0.0/16", "fd00:10:244::/48"}, wantStatus: http.StatusServiceUnavailable, wantWithheld: "1"},
		{ranges: []string{"10.244.0.0/16", "127.0.0.0/8"}, wantStatus: http.StatusOK, wantWithheld: "0"},
	} {
		srv, _, opts := startGateway(t)
		opts.EndpointRanges = tc.ranges
		listen := int32(testkit.FreePort(t))
		publishModel(t, srv, &edgev1.Model{Version: "1", Gateways: []edgev1.Gateway{httpGateway(t, backend.Listener.Addr().String(), listen)}})
		before := dialled.Load()
		stop := runEdge(t, opts)
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("ranges %v: the edge answers %d", tc.ranges, tc.wantStatus), func(context.Context) error {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", listen))
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		})
		if got := metricValue(t, opts.MetricsAddr, "fleetnet_edge_endpoints_withheld"); got != tc.wantWithheld {
			t.Errorf("ranges %v: fleetnet_edge_endpoints_withheld %s, want %s", tc.ranges, got, tc.wantWithheld)
		}
		if n := dialled.Load() - before; (n == 0) != (tc.wantStatus != http.StatusOK) {
			t.Errorf("ranges %v: the backend saw %d requests", tc.ranges, n)
		}
		stop()
	}
}

// metricValue is the value of an unlabelled metric the edge serves.
func metricValue(t *testing.T, addr, name string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			return v
		}
	}
	t.Fatalf("%s is not among the edge's metrics", name)
	return ""
}

func publishModel(t *testing.T, srv *distribute.Server, m *edgev1.Model) {
	t.Helper()
	doc, certs, err := edgev1.EncodeModel(m)
	if err != nil {
		t.Fatal(err)
	}
	srv.Publish(edgev1.ModelContentType, doc, certs)
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
