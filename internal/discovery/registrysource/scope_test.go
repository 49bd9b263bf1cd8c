package registrysource_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/discovery/discoverytest"
	"github.com/fleetnet/fleetnet/internal/discovery/registrysource"
	discoveryserver "github.com/fleetnet/fleetnet/internal/discovery/server"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/prometheus/client_golang/prometheus"
)

// TestScopedExports runs fleetnet-discovery's API on the registry source
// against a real registry: cluster a exports demo/echo with export-to: hub
// (and b exports demo/other to every cluster). Through discovery, b's
// cluster certificate gets 404 for demo/echo, as for a pool that does not
// exist, and no demo/echo in lists or watches, while hub's, a's, an
// administrator's and a read token see it. A watch follows the scope: a
// widened scope is an upsert for b, a narrowed one a delete, and a
// narrowing written with new content never shows b that content.
func TestScopedExports(t *testing.T) {
	r := registrytest.Start(t, server.Config{})
	ctx := t.Context()
	reg := map[string]registryv1.RegistryClient{}
	for _, id := range []string{"a", "b", "hub"} {
		reg[id] = r.Client(id, false)
		if _, err := reg[id].RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: id, ClustersetId: "fleet", Region: "region-" + id}}); err != nil {
			t.Fatal(err)
		}
	}
	echo := func(to []string, labels map[string]string) *registryv1.Export {
		e := export("a")
		e.ExportTo, e.Labels = to, labels
		return e
	}
	put := func(e *registryv1.Export) {
		t.Helper()
		if _, err := reg[e.GetKey().GetClusterId()].PutExport(ctx, &registryv1.PutExportRequest{Export: e}); err != nil {
			t.Fatal(err)
		}
	}
	putChunk := func(c *registryv1.EndpointChunk) {
		t.Helper()
		if _, err := reg[c.GetKey().GetClusterId()].PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: c}); err != nil {
			t.Fatal(err)
		}
	}
	other := export("b")
	other.Key.Name = "other"
	otherChunk := func(pods ...string) *registryv1.EndpointChunk {
		c := chunk("b", "other-a", pods...)
		c.Key.Name = "other"
		return c
	}
	put(echo([]string{"hub"}, map[string]string{"app": "echo"}))
	putChunk(chunk("a", "echo-a", "echo-1"))
	put(other)
	putChunk(otherChunk("other-1"))

	var src *registrysource.Source
	env := discoverytest.Start(t, discoverytest.Options{Source: func(st *store.Store, _ prometheus.Registerer) discoveryserver.Backend {
		src = registrysource.New(registrysource.Config{Client: r.Client("discovery", true), Store: st, Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
		return src
	}})
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-src.Synced():
	case <-time.After(10 * time.Second):
		t.Fatalf("not synced: %s", src.Status())
	}

	cert := func(kp *pki.KeyPair, err error) *pki.KeyPair {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	clients := map[string]*http.Client{
		"a":     env.HTTPClient(t, cert(env.CA.ClusterCert("a"))),
		"b":     env.HTTPClient(t, cert(env.CA.ClusterCert("b"))),
		"hub":   env.HTTPClient(t, cert(env.CA.ClusterCert("hub"))),
		"admin": env.HTTPClient(t, cert(env.CA.AdminCert("ops"))),
		"read":  env.HTTPClient(t, nil),
	}
	get := func(who, path string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest("GET", env.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if who == "read" {
			req.Header.Set("Authorization", "Bearer "+discoverytest.ReadToken)
		}
		resp, err := clients[who].Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}
	for _, tt := range []struct {
		who  string
		echo int      // GET /v1/pools/demo/echo
		list []string // GET /v1/pools
	}{
		{"b", http.StatusNotFound, []string{"demo/other"}},
		{"hub", http.StatusOK, []string{"demo/echo", "demo/other"}},
		{"a", http.StatusOK, []string{"demo/echo", "demo/other"}},
		{"admin", http.StatusOK, []string{"demo/echo", "demo/other"}},
		{"read", http.StatusOK, []string{"demo/echo", "demo/other"}},
	} {
		t.Run(tt.who, func(t *testing.T) {
			status, body := get(tt.who, "/v1/pools/demo/echo")
			if status != tt.echo {
				t.Errorf("GET demo/echo: %d %s, want %d", status, body, tt.echo)
			}
			if status == http.StatusNotFound {
				// The same answer as for a pool that does not exist.
				_, none := get(tt.who, "/v1/pools/demo/none")
				if want := strings.ReplaceAll(string(none), "demo/none", "demo/echo"); string(body) != want {
					t.Errorf("404 of a pool scoped away:\n  %s\nof one that does not exist:\n  %s", body, none)
				}
			}
			status, body = get(tt.who, "/v1/pools")
			var list discoveryv1.PoolList
			if err := json.Unmarshal(body, &list); status != http.StatusOK || err != nil {
				t.Fatalf("GET /v1/pools: %d %s", status, body)
			}
			var got []string
			for _, p := range list.Pools {
				got = append(got, p.Namespace+"/"+p.Name)
			}
			if !slices.Equal(got, tt.list) {
				t.Errorf("pools %v, want %v", got, tt.list)
			}
		})
	}

	// Watches: b's snapshot lacks demo/echo, hub's holds it.
	bWatch, hubWatch := watchAs(t, env, clients["b"], ""), watchAs(t, env, clients["hub"], "")
	if got := bWatch.until(t, discoveryv1.EventSynced); !slices.Equal(got, []string{"snapshot demo/other", "synced"}) {
		t.Errorf("b's snapshot: %v", got)
	}
	if got := hubWatch.until(t, discoveryv1.EventSynced); !slices.Equal(got, []string{"snapshot demo/echo", "snapshot demo/other", "synced"}) {
		t.Errorf("hub's snapshot: %v", got)
	}
	// a's endpoints change while b is out of the scope, then b's own
	// pool: b is told of its pool alone (the store's events are in
	// order: a change of demo/echo sent to b would come first).
	putChunk(chunk("a", "echo-a", "echo-1", "echo-2"))
	putChunk(otherChunk("other-1", "other-2"))
	if got := bWatch.until(t, discoveryv1.EventUpsert); !slices.Equal(got, []string{"upsert demo/other"}) {
		t.Errorf("b, after changes of demo/echo and demo/other: %v", got)
	}
	// The scope widens to b: an upsert for b.
	put(echo([]string{"hub", "b"}, map[string]string{"app": "echo"}))
	if got := bWatch.untilPool(t, "demo/echo"); got.Type != discoveryv1.EventUpsert || len(got.Pool.Clusters) != 1 || len(got.Pool.Clusters[0].Endpoints) != 2 {
		t.Errorf("b, when the scope widened to it: %s %s", got.Type, summary(got.Pool))
	}
	if status, body := get("b", "/v1/pools/demo/echo"); status != http.StatusOK {
		t.Errorf("b gets demo/echo once in the scope: %d %s", status, body)
	}
	// It narrows again, written with new labels: b gets a delete, and
	// never the new labels.
	put(echo([]string{"hub"}, map[string]string{"app": "echo", "version": "2"}))
	if got := bWatch.untilPool(t, "demo/echo"); got.Type != discoveryv1.EventDelete {
		t.Errorf("b, when the scope narrowed with new labels: %s %v, want a delete", got.Type, got.Pool.Labels)
	}
	for {
		got := hubWatch.untilPool(t, "demo/echo")
		if got.Pool.Labels["version"] == "2" {
			break
		}
	}
	if status, body := get("b", "/v1/pools/demo/echo"); status != http.StatusNotFound {
		t.Errorf("b gets demo/echo once out of the scope again: %d %s", status, body)
	}
	// A watch of b that resumes starts afresh: a reset and a snapshot of
	// what it may see, not deletes that would name what it never saw.
	resumed := watchAs(t, env, clients["b"], fmt.Sprintf("?revision=%d", bWatch.last))
	if got := resumed.until(t, discoveryv1.EventSynced); !slices.Equal(got, []string{"reset", "snapshot demo/other", "synced"}) {
		t.Errorf("b's resumed watch: %v", got)
	}
}

// scopeWatch reads a watch's events as they come.
type scopeWatch struct {
	events chan discoveryv1.Event
	// last is the revision of the last upsert, delete or synced event
	// taken.
	last int64
}

func watchAs(t *testing.T, env *discoverytest.Env, hc *http.Client, query string) *scopeWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", env.URL+"/v1/watch"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("watch: %d %s", resp.StatusCode, b)
	}
	w := &scopeWatch{events: make(chan discoveryv1.Event, 1000)}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e discoveryv1.Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				panic(fmt.Sprintf("undecodable event %q", sc.Bytes()))
			}
			w.events <- e
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-ended
	})
	return w
}

func (w *scopeWatch) next(t *testing.T) discoveryv1.Event {
	t.Helper()
	select {
	case e := <-w.events:
		switch e.Type {
		case discoveryv1.EventUpsert, discoveryv1.EventDelete, discoveryv1.EventSynced:
			w.last = e.Revision
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event in 10s")
		return discoveryv1.Event{}
	}
}

// until returns the events up to the first of type typ, briefly.
func (w *scopeWatch) until(t *testing.T, typ discoveryv1.EventType) []string {
	t.Helper()
	var out []string
	for {
		e := w.next(t)
		s := string(e.Type)
		if e.Pool != nil {
			s += " " + e.Pool.Namespace + "/" + e.Pool.Name
		}
		out = append(out, s)
		if e.Type == typ {
			return out
		}
	}
}

// untilPool returns the next event of pool (namespace/name).
func (w *scopeWatch) untilPool(t *testing.T, pool string) discoveryv1.Event {
	t.Helper()
	for {
		if e := w.next(t); e.Pool != nil && e.Pool.Namespace+"/"+e.Pool.Name == pool {
			return e
		}
	}
}
