package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// recorder keeps the models it was given; it fails with err when set.
type recorder struct {
	mu       sync.Mutex
	got      []*edgev1.Model
	err      error
	progress Progress
}

func (r *recorder) Deploy(_ context.Context, m *edgev1.Model) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, m)
	return r.err
}

func (r *recorder) Progress() Progress { return r.progress }

func (r *recorder) last() *edgev1.Model {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) == 0 {
		return nil
	}
	return r.got[len(r.got)-1]
}

// Each provider gets its part: the edge the Gateways and edge load
// balancers, a cloud its class's load balancers only; progress and errors
// come back per provider.
func TestSplit(t *testing.T) {
	edge := &recorder{progress: Progress{Version: "v1", Served: true, Message: "served by 1 of 1 edges", Addresses: []string{"127.0.0.1"}}}
	cloud := &recorder{err: errors.New("quota exceeded"), progress: Progress{
		LoadBalancers: map[string]LoadBalancerProgress{"demo/db": {Message: "creating"}},
		ClassVersions: map[string]string{"azure-cross-region": "v0"},
	}}
	changed := make(chan struct{}, 16)
	s := &Split{Edge: edge, Clouds: map[string]Provider{"azure-cross-region": cloud}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnChange: func() { changed <- struct{}{} }}
	if got := s.Classes(); len(got) != 2 || got[0] != "edge" || got[1] != "azure-cross-region" {
		t.Errorf("Classes = %v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	m := &edgev1.Model{Version: "v1",
		Gateways: []edgev1.Gateway{{Namespace: "demo", Name: "gw"}},
		LoadBalancers: []edgev1.LoadBalancer{
			{Namespace: "demo", Name: "tcp", Class: "edge"},
			{Namespace: "demo", Name: "db", Class: "azure-cross-region"},
			{Namespace: "demo", Name: "old", Class: ""}, // from a controller before Class
		}}
	s.Set(m)
	testkit.Until(t, 10*time.Second, "both providers", func() bool { return edge.last() != nil && cloud.last() != nil })
	e, c := edge.last(), cloud.last()
	if e.Version != "v1" || len(e.Gateways) != 1 || len(e.LoadBalancers) != 2 || e.LoadBalancers[0].Name != "tcp" || e.LoadBalancers[1].Name != "old" {
		t.Errorf("edge got %+v", e)
	}
	if c.Version != "v1" || len(c.Gateways) != 0 || len(c.LoadBalancers) != 1 || c.LoadBalancers[0].Name != "db" {
		t.Errorf("cloud got %+v", c)
	}
	if len(m.LoadBalancers) != 3 {
		t.Errorf("the controller's model was changed: %+v", m.LoadBalancers)
	}

	p := s.Progress()
	if p.Version != "v1" || !p.Served || p.LoadBalancers["demo/db"].Message != "creating" || p.ClassVersions["azure-cross-region"] != "v0" {
		t.Errorf("Progress = %+v", p)
	}
	testkit.Until(t, 10*time.Second, "the cloud's error", func() bool { return s.ClassError("azure-cross-region") != nil })
	if err := s.ClassError("azure-cross-region"); err.Error() != "quota exceeded" {
		t.Errorf("ClassError(azure-cross-region) = %q", err)
	}
	// One provider's failure is its own objects' only.
	if err := s.ClassError(ClassEdge); err != nil {
		t.Errorf("ClassError(edge) = %q, want nil: the cloud's failure is not the edge's", err)
	}
}

// The provider metrics count each class's deploys by result and tell the
// objects a cloud provider does not serve yet, with their age.
func TestSplitMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	cloud := &recorder{err: errors.New("quota exceeded"), progress: Progress{
		LoadBalancers: map[string]LoadBalancerProgress{"demo/db": {Message: "creating"}}}}
	// the edge serves whatever it is given
	edge := &recorder{progress: Progress{Version: "v1", Served: true}}
	s := &Split{Edge: edge, Clouds: map[string]Provider{"azure-cross-region": cloud}, Log: slog.New(slog.DiscardHandler)}
	s.Metrics = NewMetrics(reg, s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	s.Set(&edgev1.Model{Version: "v1", LoadBalancers: []edgev1.LoadBalancer{{Namespace: "demo", Name: "db", Class: "azure-cross-region"}}})
	testkit.Eventually(t, 10*time.Second, "deploys counted", func(context.Context) error {
		for _, want := range []string{
			`fleetnet_gateway_deploys_total{class="edge",result="success"} 1`,
			`fleetnet_gateway_deploys_total{class="azure-cross-region",result="failure"}`,
			`fleetnet_gateway_queue_depth{class="azure-cross-region"} 1`,
			`fleetnet_gateway_queue_depth{class="edge"} 0`,
			`fleetnet_gateway_objects_pending{class="azure-cross-region"} 1`,
			`fleetnet_gateway_objects_pending{class="edge"} 0`,
			`fleetnet_gateway_last_deploy_success_timestamp_seconds{class="edge"}`,
		} {
			got, err := gathered(reg)
			if err != nil {
				return err
			}
			if !strings.Contains(got, want) {
				return fmt.Errorf("no %s in\n%s", want, got)
			}
		}
		return nil
	})
}

// gathered is reg's metrics in the text format.
func gathered(reg *prometheus.Registry) (string, error) {
	families, err := reg.Gather()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}
