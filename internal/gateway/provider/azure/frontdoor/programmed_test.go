package frontdoor

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/azure/armsim"
)

// Programmed follows provisioningState, domain validation and Private
// Link approval; deploymentStatus holds it only when Failed. A Gateway
// provisioned and serving while Front Door reports deploymentStatus
// NotStarted (armsim.ReportNotStarted) is Programmed, past WaitBound too,
// and says that it is propagating.
func TestProgrammedWhileDeploymentStatusNotStarted(t *testing.T) {
	for _, tc := range []struct {
		name         string
		opts         armsim.Options
		notStarted   bool // Front Door reports NotStarted whatever the progress
		failRoute    bool // a route's deployment ends Failed
		wantServed   bool
		wantMessage  string
		wantEdgeCode int
	}{
		{name: "reported NotStarted while serving", opts: armsim.Options{Polls: 1, DeployReads: 1}, notStarted: true,
			wantServed: true, wantMessage: "deploymentStatus NotStarted", wantEdgeCode: http.StatusOK},
		{name: "still propagating", opts: armsim.Options{Polls: 1, DeployReads: 1000},
			wantServed: true, wantMessage: "(propagating to Front Door's edge)", wantEdgeCode: http.StatusNotFound},
		{name: "deployed", opts: armsim.Options{Polls: 1},
			wantServed: true, wantMessage: "all 12 resources deployed", wantEdgeCode: http.StatusOK},
		{name: "deployment Failed", opts: armsim.Options{Polls: 1}, failRoute: true,
			wantServed: false, wantMessage: "provisioned, deployment Failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.opts)
			h.sim.ReportNotStarted(tc.notStarted)
			backendSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "api") }))
			t.Cleanup(backendSrv.Close)
			edge := h.sim.Edge()
			edge.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, backendSrv.Listener.Addr().String())
			}
			edgeSrv := httptest.NewServer(edge)
			t.Cleanup(edgeSrv.Close)

			p := h.provider()
			p.cfg.WaitBound = time.Minute
			if err := p.Deploy(context.Background(), modelOf("v1", h.gateway("afd-standard", nil))); err != nil {
				t.Fatal(err)
			}
			validateDomains(h)
			if tc.failRoute {
				h.sim.FailDeployment(h.sim.Resources(armsim.TypeRoute)[0].ID)
			}
			// Past WaitBound: a deploymentStatus that stays NotStarted is no
			// timeout; a Failed one keeps Programmed False.
			h.until(p, gwKey, time.Minute, func(g GatewayProgress) bool {
				return strings.Contains(g.Message, tc.wantMessage) && h.clock.Since(time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)) > 2*time.Minute
			})
			g := p.Gateways()[gwKey]
			if g.Served != tc.wantServed {
				t.Fatalf("served %v, want %v: %q", g.Served, tc.wantServed, g.Message)
			}
			if tc.wantServed && g.Reason != "" {
				t.Errorf("reason %q on a programmed Gateway: %q", g.Reason, g.Message)
			}
			if tc.wantServed && len(g.Addresses) != 2 {
				t.Errorf("addresses %v", g.Addresses)
			}
			if pr := p.Progress().Gateways[gwKey]; pr.Served != tc.wantServed || pr.Reason == keys.ReasonAzureTimeout {
				t.Errorf("progress %+v", pr)
			}
			if tc.wantEdgeCode == 0 {
				return
			}
			req, _ := http.NewRequest(http.MethodGet, edgeSrv.URL+"/api", nil)
			req.Host = "app.example.com"
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != tc.wantEdgeCode {
				t.Errorf("the simulated edge answered %d, want %d", resp.StatusCode, tc.wantEdgeCode)
			}
		})
	}
}
