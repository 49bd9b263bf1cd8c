package frontdoor

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/azure/armsim"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// A request Azure never answers ends at Config.TryTimeout (each try,
// then azcore's retries): the Gateway it belongs to fails with reason
// AzureTimeout naming the request, the other Gateway of the model is
// deployed and served meanwhile, and once Azure answers again the next
// deploy serves both.
func TestHungRequestTimesOut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault armsim.Fault
		want  string
	}{
		{name: "reading the profile", fault: armsim.Fault{API: "ProfilesClient.Get", Method: http.MethodGet},
			want: "reading Front Door profile"},
		{name: "creating a route", fault: armsim.Fault{API: "RoutesClient.BeginCreate", Method: http.MethodPut},
			want: "creating route"},
		{name: "polling the profile's creation", fault: armsim.Fault{API: "ProfilesClient.BeginCreate", Polls: true},
			want: "creating profile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, armsim.Options{Polls: 1})
			h.tryTimeout = 20 * time.Millisecond
			p := h.provider()
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel) // ends a request left hanging, should the test fail
			stuck := h.gateway("afd-standard", nil)
			other := h.gateway("afd-standard", nil)
			other.Name, other.UID = "other", "uid-2"
			for i := range other.Listeners {
				other.Listeners[i].VirtualHosts[0].Hostname = "other.example.com"
			}
			f := tc.fault
			f.Hang, f.ID = true, profileName(owner, stuck.Namespace, stuck.Name)
			hang := h.sim.Inject(f)

			deployed := make(chan error, 1)
			go func() { deployed <- p.Deploy(ctx, modelOf("v1", stuck, other)) }()
			var err error
			testkit.Until(t, 20*time.Second, "the deploy ending", func() bool {
				select {
				case err = <-deployed:
					return true
				default:
					return false
				}
			})
			if err == nil || !strings.Contains(err.Error(), "per-try timeout") {
				t.Fatalf("deploy: %v, want web/public's per-try timeout", err)
			}
			if hang.Fired() == 0 {
				t.Fatal("no request hung")
			}
			g := p.Gateways()[gwKey]
			if g.Served || g.Reason != keys.ReasonAzureTimeout || !strings.Contains(g.Message, tc.want) ||
				!strings.Contains(g.Message, "no answer from Azure within the 20ms per-try timeout") {
				t.Errorf("web/public: served %v reason %q message %q", g.Served, g.Reason, g.Message)
			}
			if ev := h.eventList(); len(ev) != 1 || !strings.HasPrefix(ev[0], gwKey+" "+keys.ReasonAzureTimeout) {
				t.Errorf("events %v", ev)
			}
			validateDomains(h)
			h.until(p, "web/other", time.Second, func(g GatewayProgress) bool { return g.Served })

			hang.Remove()
			if err := p.Deploy(ctx, modelOf("v1", stuck, other)); err != nil {
				t.Fatalf("deploy once Azure answers: %v", err)
			}
			validateDomains(h)
			h.until(p, gwKey, time.Second, func(g GatewayProgress) bool { return g.Served && g.Reason == "" })
		})
	}
}
