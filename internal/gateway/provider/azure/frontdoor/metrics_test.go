package frontdoor

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/azure/armsim"
	"github.com/fleetnet/fleetnet/internal/gateway/provider"
)

// metricValue is the value of the series name{labels} on reg (a
// counter's or gauge's value, a histogram's sample sum), and whether it
// exists.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue(), true
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue(), true
			case dto.MetricType_HISTOGRAM:
				return m.GetHistogram().GetSampleSum(), true
			}
		}
	}
	return 0, false
}

// The ARM metrics count what the simulation answers: errors by status
// code and operation, 429s and their Retry-After, unanswered tries; the
// Private Link connections by state.
func TestARMMetrics(t *testing.T) {
	type series struct {
		name   string
		labels map[string]string
		want   float64
	}
	for _, tc := range []struct {
		name   string
		faults []armsim.Fault
		want   []series
	}{
		{name: "throttled with Retry-After", faults: []armsim.Fault{{API: "AFDOriginGroupsClient.BeginCreate", Method: http.MethodPut, Times: 2, Err: armsim.Throttled(3 * time.Second)}},
			want: []series{
				{"fleetnet_gateway_azure_arm_throttled_total", map[string]string{"class": Class, "operation": "AFDOriginGroupsClient.BeginCreate"}, 2},
				{"fleetnet_gateway_azure_arm_errors_total", map[string]string{"class": Class, "operation": "AFDOriginGroupsClient.BeginCreate", "code": "429"}, 2},
				{"fleetnet_gateway_azure_arm_retry_after_seconds", map[string]string{"class": Class}, 6},
			}},
		{name: "refused", faults: []armsim.Fault{{API: "RoutesClient.BeginCreate", Method: http.MethodPut, Times: 1, Err: &armsim.Error{Status: http.StatusForbidden, Code: "AuthorizationFailed", Message: "no"}}},
			want: []series{
				{"fleetnet_gateway_azure_arm_errors_total", map[string]string{"class": Class, "operation": "RoutesClient.BeginCreate", "code": "403"}, 1},
			}},
		{name: "unanswered", faults: []armsim.Fault{{API: "ProfilesClient.Get", Method: http.MethodGet, Times: 1, Hang: true}},
			want: []series{
				{"fleetnet_gateway_azure_arm_errors_total", map[string]string{"class": Class, "operation": "ProfilesClient.Get", "code": "timeout"}, 1},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, armsim.Options{Polls: 1})
			h.tryTimeout = 50 * time.Millisecond
			p := h.provider()
			reg := prometheus.NewRegistry()
			p.SetMetrics(provider.NewMetrics(reg, nil))
			for _, f := range tc.faults {
				h.sim.Inject(f)
			}
			_ = p.Deploy(context.Background(), modelOf("v1", h.gateway("afd-standard", nil)))
			for _, s := range tc.want {
				if got, ok := metricValue(t, reg, s.name, s.labels); !ok || got != s.want {
					t.Errorf("%s%v = %v (present %v), want %v", s.name, s.labels, got, ok, s.want)
				}
			}
			if got, ok := metricValue(t, reg, "fleetnet_gateway_azure_arm_errors_total", map[string]string{"code": "200"}); ok {
				t.Errorf("a 200 counted as an error: %v", got)
			}
		})
	}
}

// Private Link connections are counted by state as the Private Link
// Services report them: one approved (the PLS consents), one pending,
// then rejected by its owner.
func TestPrivateLinkMetrics(t *testing.T) {
	h := newHarness(t, armsim.Options{Polls: 1})
	h.seedPrivate("east", "eastus", map[string]*string{keys.TagAzurePLSApproval: to.Ptr("auto")})
	manual := h.seedPrivate("west", "westus", nil)
	p := h.provider()
	reg := prometheus.NewRegistry()
	p.SetMetrics(provider.NewMetrics(reg, nil))
	gw := edgev1.Gateway{Namespace: "web", Name: "public", Class: "afd-premium", Annotations: map[string]string{keys.AnnotationAzureConnectivity: "private-link"},
		Listeners: []edgev1.Listener{{Name: "http", Port: 80, Protocol: edgev1.ProtocolHTTP, VirtualHosts: []edgev1.VirtualHost{{Hostname: "*", Routes: []edgev1.Route{
			route("api", 0, "/", backend("api", 1, h.cluster("east-internal", 1), h.cluster("west-internal", 1)))}}}}}}
	gw.Listeners[0].VirtualHosts[0].Routes[0].Backends[0].Clusters[0].Cluster = "east"
	gw.Listeners[0].VirtualHosts[0].Routes[0].Backends[0].Clusters[1].Cluster = "west"
	if err := p.Deploy(context.Background(), modelOf("v1", gw)); err != nil {
		t.Fatal(err)
	}
	links := func() map[string]float64 {
		out := map[string]float64{}
		for _, s := range provider.PrivateLinkStates {
			v, _ := metricValue(t, reg, "fleetnet_gateway_azure_private_link_connections", map[string]string{"class": Class, "state": s})
			out[s] = v
		}
		return out
	}
	if got := links(); got["approved"] != 1 || got["pending"] != 1 || got["rejected"] != 0 {
		t.Fatalf("connections %v, want 1 approved and 1 pending", got)
	}
	conns := h.connections(manual)
	if len(conns) != 1 {
		t.Fatalf("connections on the manual PLS: %v", conns)
	}
	name := armsim.ConnectionName(h.sim.Resources(armsim.TypeOrigin)[0].ID) // one per profile
	if !h.sim.SetConnectionStatus(manual, name, "Rejected") {
		t.Fatalf("no connection %s on %s: %v", name, manual, conns)
	}
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := links(); got["approved"] != 1 || got["pending"] != 0 || got["rejected"] != 1 {
		t.Errorf("connections after the owner rejected one %v, want 1 approved and 1 rejected", got)
	}
}
