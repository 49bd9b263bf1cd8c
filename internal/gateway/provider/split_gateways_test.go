package provider

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// Gateways of a GatewayClass routed to a cloud provider go to it and not
// to the edge; its per-Gateway progress comes through Split's.
func TestSplitGatewayClasses(t *testing.T) {
	edge, afd := &recorder{}, &recorder{progress: Progress{Gateways: map[string]LoadBalancerProgress{"web/public": {Served: true, Message: "deployed"}}}}
	s := &Split{Edge: edge, Clouds: map[string]Provider{"azure-front-door": afd}, GatewayClasses: map[string]string{"afd": "azure-front-door", "orphan": "nowhere"},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go s.Run(ctx)
	s.Set(&edgev1.Model{Version: "v1", Gateways: []edgev1.Gateway{{Namespace: "web", Name: "public", Class: "afd"}, {Namespace: "web", Name: "edge", Class: "fleetnet"},
		{Namespace: "web", Name: "orphan", Class: "orphan"}}})
	testkit.Until(t, 10*time.Second, "both deployed", func() bool { return edge.last() != nil && afd.last() != nil })
	names := func(m *edgev1.Model) []string {
		var out []string
		for _, g := range m.Gateways {
			out = append(out, g.Name)
		}
		return out
	}
	if got := names(edge.last()); len(got) != 2 || got[0] != "edge" || got[1] != "orphan" {
		t.Errorf("edge got %v, want edge and orphan (a class routed to no provider stays at the edge)", got)
	}
	if got := names(afd.last()); len(got) != 1 || got[0] != "public" {
		t.Errorf("cloud got %v, want public", got)
	}
	if g := s.Progress().Gateways["web/public"]; !g.Served || g.Message != "deployed" {
		t.Errorf("progress %+v", g)
	}
}
