package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/internal/discovery/client"
	"github.com/fleetnet/fleetnet/internal/discovery/discoverytest"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/google/go-cmp/cmp"
)

func TestPoolsApply(t *testing.T) {
	p := func(name string, rev int64) *discoveryv1.Pool {
		return &discoveryv1.Pool{Namespace: "demo", Name: name, Revision: rev}
	}
	ev := func(typ discoveryv1.EventType, rev int64, pool *discoveryv1.Pool) discoveryv1.Event {
		return discoveryv1.Event{Type: typ, Revision: rev, Pool: pool}
	}
	tests := []struct {
		name   string
		events []discoveryv1.Event
		want   []string // name@revision
		rev    int64
		synced bool
	}{
		{"nothing before the synced mark", []discoveryv1.Event{ev("snapshot", 1, p("a", 1))}, nil, 0, false},
		{"a snapshot", []discoveryv1.Event{ev("snapshot", 1, p("a", 1)), ev("snapshot", 2, p("b", 2)), ev("synced", 2, nil)}, []string{"a@1", "b@2"}, 2, true},
		{"an empty store", []discoveryv1.Event{ev("synced", 7, nil)}, nil, 7, true},
		{"deltas", []discoveryv1.Event{
			ev("snapshot", 1, p("a", 1)), ev("synced", 1, nil), ev("upsert", 2, p("b", 2)), ev("upsert", 3, p("a", 3)), ev("delete", 4, p("b", 0)),
		}, []string{"a@3"}, 4, true},
		{"a reset keeps the old view until the new snapshot is synced", []discoveryv1.Event{
			ev("snapshot", 1, p("a", 1)), ev("synced", 1, nil), ev("reset", 9, nil), ev("snapshot", 9, p("c", 9)),
		}, []string{"a@1"}, 1, true},
		{"then replaces it", []discoveryv1.Event{
			ev("snapshot", 1, p("a", 1)), ev("synced", 1, nil), ev("reset", 9, nil), ev("snapshot", 9, p("c", 9)), ev("synced", 9, nil),
		}, []string{"c@9"}, 9, true},
		{"a reset drops a partial snapshot", []discoveryv1.Event{
			ev("snapshot", 1, p("a", 1)), ev("reset", 0, nil), ev("snapshot", 2, p("b", 2)), ev("synced", 2, nil),
		}, []string{"b@2"}, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s client.Pools
			for _, e := range tt.events {
				s.Apply(e)
			}
			if diff := cmp.Diff(tt.want, names(s.List())); diff != "" {
				t.Errorf("pools (-want +got):\n%s", diff)
			}
			if s.Revision != tt.rev || s.Synced != tt.synced {
				t.Errorf("revision %d synced %v, want %d %v", s.Revision, s.Synced, tt.rev, tt.synced)
			}
		})
	}
}

func names(ps []discoveryv1.Pool) []string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s@%d", p.Name, p.Revision))
	}
	return out
}

func TestCalls(t *testing.T) {
	env := discoverytest.Start(t, discoverytest.Options{Routers: []discoveryv1.Router{{InstanceID: "r0", Addresses: []string{"10.9.0.1"}, Ready: true}}})
	c := env.Client(t, discoverytest.RegisterToken, nil)
	ctx := context.Background()
	reg := discoverytest.Registration("demo", "echo", "east", "eu-west-1", "e1")
	reg.Labels = map[string]string{"app": "echo"}
	lease, err := c.Register(ctx, reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Register(ctx, discoverytest.Registration("ml", "model", "west", "us-east-1", "m1")); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListPools(ctx, client.ListOptions{LabelSelector: "app=echo"})
	if err != nil || len(list.Pools) != 1 || list.Pools[0].Name != "echo" {
		t.Errorf("ListPools: %+v %v", list, err)
	}
	list, err = c.ListPools(ctx, client.ListOptions{Region: "us-east-1"})
	if err != nil || len(list.Pools) != 1 || list.Pools[0].Name != "model" {
		t.Errorf("ListPools in a region: %+v %v", list, err)
	}
	pool, err := c.GetPool(ctx, "demo", "echo")
	if err != nil || pool.Clusters[0].Endpoints[0].InstanceID != "e1" {
		t.Errorf("GetPool: %+v %v", pool, err)
	}
	routers, err := c.Routers(ctx)
	if err != nil || len(routers.Routers) != 1 {
		t.Errorf("Routers: %+v %v", routers, err)
	}
	if _, err := c.Renew(ctx, lease.ID, nil); err != nil {
		t.Errorf("Renew: %v", err)
	}
	if err := c.Deregister(ctx, lease.ID); err != nil {
		t.Errorf("Deregister: %v", err)
	}
	if _, err := c.GetPool(ctx, "demo", "echo"); !client.IsNotFound(err) {
		t.Errorf("GetPool after deregistering: %v, want not found", err)
	}
	if _, err := c.Renew(ctx, lease.ID, nil); !client.IsNotFound(err) {
		t.Errorf("Renew after deregistering: %v, want not found", err)
	}
	_, err = c.ListPools(ctx, client.ListOptions{LabelSelector: "app in ("})
	var se *client.StatusError
	if !errors.As(err, &se) || se.StatusCode != 400 || se.Body.Field != "labelSelector" || se.Body.Value != "app in (" {
		t.Errorf("a bad selector: %v", err)
	}
	if _, err := env.Client(t, discoverytest.ReadToken, nil).Register(ctx, reg); !errors.As(err, &se) || se.StatusCode != 403 {
		t.Errorf("registering with the read role: %v", err)
	}
}

// watcher runs a client watch into a Pools and hands out its events.
type watcher struct {
	events chan discoveryv1.Event
	done   chan error
}

func startWatch(t *testing.T, c *client.Client, o client.WatchOptions) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{events: make(chan discoveryv1.Event, 1000), done: make(chan error, 1)}
	go func() {
		w.done <- c.Watch(ctx, o, func(e discoveryv1.Event) error {
			w.events <- e
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-w.done; !errors.Is(err, context.Canceled) {
			t.Errorf("Watch ended with %v", err)
		}
	})
	return w
}

func (w *watcher) next(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	timeout := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case e := <-w.events:
			s := string(e.Type)
			if e.Pool != nil {
				s += " " + e.Pool.Name
			}
			out = append(out, s)
		case <-timeout:
			t.Fatalf("waited 10s for %d events, got %v", n, out)
		}
	}
	return out
}

// A watch that loses its connection resumes from its last revision: no
// second snapshot, no change lost.
func TestWatchResumes(t *testing.T) {
	env := discoverytest.Start(t, discoverytest.Options{})
	ctx := context.Background()
	c := env.Client(t, discoverytest.RegisterToken, nil)
	if _, err := c.Register(ctx, discoverytest.Registration("demo", "a", "east", "", "a1")); err != nil {
		t.Fatal(err)
	}
	w := startWatch(t, env.Client(t, discoverytest.ReadToken, nil), client.WatchOptions{})
	if diff := cmp.Diff([]string{"snapshot a", "synced"}, w.next(t, 2)); diff != "" {
		t.Errorf("start (-want +got):\n%s", diff)
	}
	env.HTTPServer.CloseClientConnections()
	c = env.Client(t, discoverytest.RegisterToken, nil) // its connection was closed too
	// The server has seen the first watch end.
	testkit.Until(t, 10*time.Second, "the first watch to end", func() bool {
		return requests(t, env, "GET /v1/watch") >= 1
	})
	for _, name := range []string{"b", "c"} {
		if _, err := c.Register(ctx, discoverytest.Registration("demo", name, "east", "", name+"1")); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"upsert b", "upsert c"}, w.next(t, 2)); diff != "" {
		t.Errorf("after the disconnect (-want +got):\n%s", diff)
	}
}

// requests returns how many requests of a route ended, whatever the code.
func requests(t *testing.T, env *discoverytest.Env, route string) float64 {
	t.Helper()
	{
		mfs, err := env.Metrics.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var n float64
		for _, mf := range mfs {
			if mf.GetName() != "fleetnet_discovery_requests_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "route" && l.GetValue() == route {
						n += m.GetCounter().GetValue()
					}
				}
			}
		}
		return n
	}
}

// switchable fails every request while down.
type switchable struct {
	down atomic.Bool
	base http.RoundTripper
}

func (s *switchable) RoundTrip(r *http.Request) (*http.Response, error) {
	if s.down.Load() {
		return nil, errors.New("network down (test)")
	}
	return s.base.RoundTrip(r)
}

// A watch away for longer than the server's history gets a reset and a
// fresh snapshot.
func TestWatchReset(t *testing.T) {
	env := discoverytest.Start(t, discoverytest.Options{History: 2})
	ctx := context.Background()
	reg := env.Client(t, discoverytest.RegisterToken, nil)
	if _, err := reg.Register(ctx, discoverytest.Registration("demo", "a", "east", "", "a1")); err != nil {
		t.Fatal(err)
	}
	hc := env.HTTPClient(t, nil)
	sw := &switchable{base: hc.Transport}
	hc.Transport = sw
	c, err := client.New(client.Options{BaseURL: env.URL, HTTPClient: hc, Token: discoverytest.ReadToken, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w := startWatch(t, c, client.WatchOptions{})
	w.next(t, 2)
	sw.down.Store(true)
	env.HTTPServer.CloseClientConnections()
	reg = env.Client(t, discoverytest.RegisterToken, nil) // its connection was closed too
	for _, name := range []string{"b", "c", "d", "e", "f", "g"} {
		if _, err := reg.Register(ctx, discoverytest.Registration("demo", name, "east", "", name+"1")); err != nil {
			t.Fatal(err)
		}
	}
	sw.down.Store(false)
	want := []string{"reset", "snapshot a", "snapshot b", "snapshot c", "snapshot d", "snapshot e", "snapshot f", "snapshot g", "synced"}
	if diff := cmp.Diff(want, w.next(t, len(want))); diff != "" {
		t.Errorf("after a long disconnect (-want +got):\n%s", diff)
	}
}

// A connection lost in the middle of a snapshot: the client tells the
// handler to drop the partial snapshot and starts again without a revision.
func TestWatchMidSnapshot(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		switch calls.Add(1) {
		case 1:
			fmt.Fprintln(w, `{"type":"snapshot","revision":4,"pool":{"namespace":"demo","name":"a","revision":4,"clusters":[]}}`)
		default:
			if r.URL.Query().Has("revision") {
				http.Error(w, `{"message":"resumed mid-snapshot"}`, 400)
				return
			}
			fmt.Fprintln(w, `{"type":"snapshot","revision":5,"pool":{"namespace":"demo","name":"b","revision":5,"clusters":[]}}`)
			fmt.Fprintln(w, `{"type":"synced","revision":5}`)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(client.Options{BaseURL: srv.URL, MinBackoff: time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var pools client.Pools
	w := startWatch(t, c, client.WatchOptions{})
	got := w.next(t, 4)
	if diff := cmp.Diff([]string{"snapshot a", "reset", "snapshot b", "synced"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, e := range []discoveryv1.Event{
		{Type: "snapshot", Pool: &discoveryv1.Pool{Name: "a"}}, {Type: "reset"}, {Type: "snapshot", Pool: &discoveryv1.Pool{Name: "b"}}, {Type: "synced", Revision: 5},
	} {
		pools.Apply(e)
	}
	if diff := cmp.Diff([]string{"b@0"}, names(pools.List())); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
}

func TestWatchRefused(t *testing.T) {
	env := discoverytest.Start(t, discoverytest.Options{})
	for _, tt := range []struct {
		token  string
		status int
		opts   client.WatchOptions
	}{
		{"", 401, client.WatchOptions{}},
		{discoverytest.ReadToken, 400, client.WatchOptions{LabelSelector: "a in ("}},
	} {
		err := env.Client(t, tt.token, nil).Watch(context.Background(), tt.opts, func(discoveryv1.Event) error { return nil })
		var se *client.StatusError
		if !errors.As(err, &se) || se.StatusCode != tt.status {
			t.Errorf("Watch with token %q and %+v: %v, want %d", tt.token, tt.opts, err, tt.status)
		}
	}
	// A handler's error ends the watch and is returned as is.
	stop := errors.New("enough")
	err := env.Client(t, discoverytest.ReadToken, nil).Watch(context.Background(), client.WatchOptions{}, func(discoveryv1.Event) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("Watch with a failing handler: %v", err)
	}
	if !strings.Contains(fmt.Sprint(err), "enough") {
		t.Errorf("error %v", err)
	}
}
