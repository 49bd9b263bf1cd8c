package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/discovery/discoverytest"
	"github.com/fleetnet/fleetnet/internal/discovery/memory"
	"github.com/fleetnet/fleetnet/internal/discovery/server"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// call makes one request with a token (empty: none) through a client that
// validates the answer against the OpenAPI document.
func call(t *testing.T, env *discoverytest.Env, hc *http.Client, token, method, path string, body any) (int, []byte, http.Header) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, env.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if hc == nil {
		hc = env.HTTPClient(t, nil)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b, resp.Header
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return v
}

func register(t *testing.T, env *discoverytest.Env, reg discoveryv1.Registration) discoveryv1.Lease {
	t.Helper()
	status, b, _ := call(t, env, nil, discoverytest.RegisterToken, "POST", "/v1/registrations", reg)
	if status != http.StatusCreated {
		t.Fatalf("register: %d %s", status, b)
	}
	return decode[discoveryv1.Lease](t, b)
}

func TestPools(t *testing.T) {
	env := discoverytest.Start(t, discoverytest.Options{})
	echoEast := discoverytest.Registration("demo", "echo", "east", "eu-west-1", "e1", "e2")
	echoEast.Labels = map[string]string{"app": "echo", "tier": "web"}
	echoWest := discoverytest.Registration("demo", "echo", "west", "us-east-1", "w1")
	model := discoverytest.Registration("ml", "model", "west", "us-east-1", "m1")
	model.Labels = map[string]string{"app": "model"}
	cache := discoverytest.Registration("demo", "cache", "east", "eu-west-1", "c1")
	for _, r := range []discoveryv1.Registration{echoEast, echoWest, model, cache} {
		register(t, env, r)
	}

	tests := []struct {
		query string
		want  []string // namespace/name:clusters
	}{
		{"", []string{"demo/cache:east", "demo/echo:east,west", "ml/model:west"}},
		{"?namespace=demo", []string{"demo/cache:east", "demo/echo:east,west"}},
		{"?labelSelector=app", []string{"demo/echo:east,west", "ml/model:west"}},
		{"?labelSelector=" + url.QueryEscape("app in (model,other)"), []string{"ml/model:west"}},
		{"?labelSelector=" + url.QueryEscape("app=echo,tier!=db"), []string{"demo/echo:east,west"}},
		{"?labelSelector=" + url.QueryEscape("!app"), []string{"demo/cache:east"}},
		{"?region=us-east-1", []string{"demo/echo:west", "ml/model:west"}},
		{"?namespace=demo&region=us-east-1&labelSelector=app", []string{"demo/echo:west"}},
		{"?namespace=nothing", []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			status, b, _ := call(t, env, nil, discoverytest.ReadToken, "GET", "/v1/pools"+tt.query, nil)
			if status != http.StatusOK {
				t.Fatalf("%d %s", status, b)
			}
			list := decode[discoveryv1.PoolList](t, b)
			got := []string{}
			for _, p := range list.Pools {
				var cs []string
				for _, c := range p.Clusters {
					cs = append(cs, c.Cluster)
				}
				got = append(got, p.Namespace+"/"+p.Name+":"+strings.Join(cs, ","))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("pools (-want +got):\n%s", diff)
			}
			if list.Revision != env.Store.Revision() || !list.Synced {
				t.Errorf("revision %d synced %v, want %d and true", list.Revision, list.Synced, env.Store.Revision())
			}
		})
	}

	status, b, h := call(t, env, nil, discoverytest.ReadToken, "GET", "/v1/pools/demo/echo", nil)
	if status != http.StatusOK {
		t.Fatalf("get: %d %s", status, b)
	}
	p := decode[discoveryv1.Pool](t, b)
	if len(p.Clusters) != 2 || p.Clusters[0].Region != "eu-west-1" || len(p.Clusters[0].Endpoints) != 2 || !p.Clusters[0].Endpoints[0].Ready {
		t.Errorf("pool demo/echo: %+v", p)
	}
	if want := `"` + strconv.FormatInt(p.Revision, 10) + `"`; h.Get("ETag") != want {
		t.Errorf("ETag %q, want %q", h.Get("ETag"), want)
	}
	status, b, _ = call(t, env, nil, discoverytest.ReadToken, "GET", "/v1/pools/demo/echo?region=us-east-1", nil)
	if p := decode[discoveryv1.Pool](t, b); status != http.StatusOK || len(p.Clusters) != 1 || p.Clusters[0].Cluster != "west" {
		t.Errorf("get in a region: %d %s", status, b)
	}
}

func TestRouters(t *testing.T) {
	env := discoverytest.Start(t, discoverytest.Options{Routers: []discoveryv1.Router{
		{InstanceID: "router-1", Addresses: []string{"10.1.0.1"}, Cluster: "west", Region: "us-east-1", Ready: true},
		{InstanceID: "router-0", Addresses: []string{"10.0.0.1"}, Ports: []discoveryv1.Port{{Name: "grpc", Port: 9000, Protocol: "TCP"}}, Cluster: "east", Ready: true},
	}})
	status, b, _ := call(t, env, nil, discoverytest.ReadToken, "GET", "/v1/routers", nil)
	list := decode[discoveryv1.RouterList](t, b)
	if status != http.StatusOK || len(list.Routers) != 2 || list.Routers[0].InstanceID != "router-0" {
		t.Errorf("routers: %d %s", status, b)
	}
	empty := discoverytest.Start(t, discoverytest.Options{})
	if status, b, _ := call(t, empty, nil, discoverytest.ReadToken, "GET", "/v1/routers", nil); status != http.StatusOK || string(b) != "{\"routers\":[]}\n" {
		t.Errorf("no routers: %d %s", status, b)
	}
}

func TestBadRequests(t *testing.T) {
	env := discoverytest.Start(t, discoverytest.Options{})
	lease := register(t, env, discoverytest.Registration("demo", "echo", "east", "", "e1"))
	bad := discoverytest.Registration("demo", "echo", "east", "", "e1")
	bad.Endpoints[0].Addresses = []string{"10.0.0.300"}
	moved := discoverytest.Registration("demo", "echo", "west", "", "e1")
	tests := []struct {
		name, method, path string
		body               any
		header             string // Last-Event-ID
		status             int
		want               discoveryv1.Error // message: a part of it
	}{
		{"revision not a number", "GET", "/v1/watch?revision=abc", nil, "", 400, discoveryv1.Error{Field: "revision", Value: "abc", Message: "not a number"}},
		{"negative revision", "GET", "/v1/watch?revision=-4", nil, "", 400, discoveryv1.Error{Field: "revision", Value: "-4", Message: "must not be negative"}},
		{"bad Last-Event-ID", "GET", "/v1/watch", nil, "x1", 400, discoveryv1.Error{Field: "Last-Event-ID", Value: "x1", Message: "not a number"}},
		{"bad selector", "GET", "/v1/pools?labelSelector=" + url.QueryEscape("app in (a"), nil, "", 400, discoveryv1.Error{Field: "labelSelector", Value: "app in (a", Message: "found"}},
		{"bad selector on a watch", "GET", "/v1/watch?labelSelector=" + url.QueryEscape("=x"), nil, "", 400, discoveryv1.Error{Field: "labelSelector", Value: "=x", Message: "found"}},
		{"bad namespace", "GET", "/v1/pools?namespace=Demo_1", nil, "", 400, discoveryv1.Error{Field: "namespace", Value: "Demo_1", Message: "RFC 1123"}},
		{"bad region", "GET", "/v1/pools?region=" + url.QueryEscape("eu west"), nil, "", 400, discoveryv1.Error{Field: "region", Value: "eu west", Message: "alphanumeric"}},
		{"misspelt parameter", "GET", "/v1/pools?labelselector=app", nil, "", 400, discoveryv1.Error{Field: "labelselector", Value: "app", Message: "unknown query parameter; known: namespace, labelSelector, region"}},
		{"parameter twice", "GET", "/v1/pools?region=a&region=b", nil, "", 400, discoveryv1.Error{Field: "region", Value: "a,b", Message: "more than once"}},
		{"no pool", "GET", "/v1/pools/demo/nothing", nil, "", 404, discoveryv1.Error{Field: "pool", Value: "demo/nothing", Message: "no such pool"}},
		{"no cluster in the region", "GET", "/v1/pools/demo/echo?region=us", nil, "", 404, discoveryv1.Error{Field: "region", Value: "us", Message: "no cluster in this region"}},
		{"registration not JSON", "POST", "/v1/registrations", "{", "", 400, discoveryv1.Error{Field: "body", Message: "unexpected EOF"}},
		{"registration without body", "POST", "/v1/registrations", "", "", 400, discoveryv1.Error{Field: "body", Message: "a registration (JSON) is required"}},
		{"wrong type", "POST", "/v1/registrations", `{"namespace":5}`, "", 400, discoveryv1.Error{Field: "namespace", Value: "number", Message: "must be string"}},
		{"wrong nested type", "POST", "/v1/registrations", `{"endpoints":[{"ready":"yes"}]}`, "", 400, discoveryv1.Error{Field: "endpoints.ready", Value: "string", Message: "must be bool"}},
		{"unknown field", "POST", "/v1/registrations", `{"namespace":"demo","ttl":5}`, "", 400, discoveryv1.Error{Field: "ttl", Message: "unknown field"}},
		{"invalid address", "POST", "/v1/registrations", bad, "", 400, discoveryv1.Error{Field: "endpoints[0].addresses[0]", Value: "10.0.0.300", Message: "not an IPv4 or IPv6 address"}},
		{"renewal into another cluster", "PUT", "/v1/registrations/" + lease.ID, moved, "", 400, discoveryv1.Error{Field: "cluster", Value: "west", Message: "cannot move it"}},
		{"renewal of an unknown registration", "PUT", "/v1/registrations/feed", nil, "", 404, discoveryv1.Error{Field: "id", Value: "feed", Message: "register again"}},
		{"deregistration of an unknown registration", "DELETE", "/v1/registrations/feed", nil, "", 404, discoveryv1.Error{Field: "id", Value: "feed", Message: "register again"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rd io.Reader
			switch b := tt.body.(type) {
			case string:
				rd = strings.NewReader(b)
			case nil:
			default:
				j, _ := json.Marshal(b)
				rd = bytes.NewReader(j)
			}
			req, _ := http.NewRequest(tt.method, env.URL+tt.path, rd)
			req.Header.Set("Authorization", "Bearer "+discoverytest.RegisterToken)
			if tt.header != "" {
				req.Header.Set("Last-Event-ID", tt.header)
			}
			resp, err := env.HTTPClient(t, nil).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			got := decode[discoveryv1.Error](t, b)
			if resp.StatusCode != tt.status || got.Field != tt.want.Field || got.Value != tt.want.Value || !strings.Contains(got.Message, tt.want.Message) {
				t.Errorf("%d %s\nwant %d %+v", resp.StatusCode, b, tt.status, tt.want)
			}
		})
	}
}

func TestRegistrationLifecycle(t *testing.T) {
	env := discoverytest.Start(t, discoverytest.Options{TTL: 10 * time.Second})
	reg := discoverytest.Registration("demo", "echo", "east", "eu-west-1", "e1", "e2")
	status, b, h := call(t, env, nil, discoverytest.RegisterToken, "POST", "/v1/registrations", reg)
	if status != http.StatusCreated {
		t.Fatalf("register: %d %s", status, b)
	}
	lease := decode[discoveryv1.Lease](t, b)
	if h.Get("Location") != "/v1/registrations/"+lease.ID || lease.TTLSeconds != 10 || !lease.ExpiresAt.Equal(env.Clock.Now().Add(10*time.Second)) {
		t.Errorf("lease %+v, Location %q", lease, h.Get("Location"))
	}
	endpoints := func() []string {
		t.Helper()
		status, b, _ := call(t, env, nil, discoverytest.ReadToken, "GET", "/v1/pools/demo/echo", nil)
		if status == http.StatusNotFound {
			return nil
		}
		var out []string
		for _, c := range decode[discoveryv1.Pool](t, b).Clusters {
			for _, e := range c.Endpoints {
				s := c.Cluster + "/" + e.InstanceID
				if !e.Ready {
					s += "(not ready)"
				}
				out = append(out, s)
			}
		}
		return out
	}
	if diff := cmp.Diff([]string{"east/e1", "east/e2"}, endpoints()); diff != "" {
		t.Errorf("registered (-want +got):\n%s", diff)
	}

	// Renew with new members, then without a body.
	f := false
	reg.Endpoints[1].Ready = &f
	env.Clock.Step(8 * time.Second)
	if status, b, _ := call(t, env, nil, discoverytest.RegisterToken, "PUT", "/v1/registrations/"+lease.ID, reg); status != http.StatusOK {
		t.Fatalf("renew with members: %d %s", status, b)
	}
	env.Clock.Step(8 * time.Second)
	if status, b, _ := call(t, env, nil, discoverytest.RegisterToken, "PUT", "/v1/registrations/"+lease.ID, nil); status != http.StatusOK {
		t.Fatalf("bare renewal: %d %s", status, b)
	}
	env.Memory.Expire()
	if diff := cmp.Diff([]string{"east/e1", "east/e2(not ready)"}, endpoints()); diff != "" {
		t.Errorf("after renewals (-want +got):\n%s", diff)
	}

	// The lease runs out: the members go.
	env.Clock.Step(10 * time.Second)
	env.Memory.Expire()
	if got := endpoints(); got != nil {
		t.Errorf("after expiry: %v", got)
	}
	if status, _, _ := call(t, env, nil, discoverytest.RegisterToken, "PUT", "/v1/registrations/"+lease.ID, nil); status != http.StatusNotFound {
		t.Errorf("renewal after expiry: %d, want 404", status)
	}

	// Deregistration removes at once.
	lease = register(t, env, reg)
	if status, b, _ := call(t, env, nil, discoverytest.RegisterToken, "DELETE", "/v1/registrations/"+lease.ID, nil); status != http.StatusNoContent {
		t.Fatalf("deregister: %d %s", status, b)
	}
	if got := endpoints(); got != nil {
		t.Errorf("after deregistration: %v", got)
	}
}

func TestRegistrationsNeedTheMemorySource(t *testing.T) {
	env := discoverytest.Start(t, discoverytest.Options{NoRegistrar: true})
	for _, c := range []struct{ method, path string }{{"POST", "/v1/registrations"}, {"PUT", "/v1/registrations/x"}, {"DELETE", "/v1/registrations/x"}} {
		status, b, _ := call(t, env, nil, discoverytest.RegisterToken, c.method, c.path, discoverytest.Registration("demo", "echo", "east", "", "e1"))
		if e := decode[discoveryv1.Error](t, b); status != http.StatusNotImplemented || !strings.Contains(e.Message, `reads its pools from "kubernetes"`) || !strings.Contains(e.Message, "--pool-source=memory") {
			t.Errorf("%s %s: %d %s", c.method, c.path, status, b)
		}
	}
}

func TestAuth(t *testing.T) {
	env := discoverytest.Start(t, discoverytest.Options{})
	admin, _ := env.CA.AdminCert("ops")
	cluster, _ := env.CA.ClusterCert("east")
	edge, _ := env.CA.EdgeCert("edge-eu")
	reader := discoverytest.ClientCert(t, env.CA, "router", discoveryv1.OrganizationRead)
	registrar := discoverytest.ClientCert(t, env.CA, "model-server", discoveryv1.OrganizationRegister)
	reg := discoverytest.Registration("demo", "echo", "east", "", "e1")

	tests := []struct {
		name          string
		token         string
		cert          *pki.KeyPair
		read, written int // statuses of GET /v1/pools and POST /v1/registrations
	}{
		{"nothing", "", nil, 401, 401},
		{"unknown token", "not-a-known-token-at-all", nil, 401, 401},
		{"read token", discoverytest.ReadToken, nil, 200, 403},
		{"register token", discoverytest.RegisterToken, nil, 200, 201},
		{"certificate with the read organization", "", reader, 200, 403},
		{"certificate with the register organization", "", registrar, 200, 201},
		{"administrator's certificate (" + keys.OrganizationAdmins + ")", "", admin, 200, 201},
		{"member cluster's certificate (" + keys.OrganizationClusters + ")", "", cluster, 200, 403},
		{"edge's certificate: authenticated, no role", "", edge, 403, 403},
		{"member cluster's certificate without a name", "", discoverytest.ClientCert(t, env.CA, "", keys.OrganizationClusters), 401, 401},
		{"administrator's certificate without a name", "", discoverytest.ClientCert(t, env.CA, "", keys.OrganizationAdmins), 401, 401},
		{"a token wins over a certificate", discoverytest.ReadToken, registrar, 200, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hc := env.HTTPClient(t, tt.cert)
			status, b, h := call(t, env, hc, tt.token, "GET", "/v1/pools", nil)
			if status != tt.read {
				t.Errorf("GET /v1/pools: %d %s, want %d", status, b, tt.read)
			}
			if status == http.StatusUnauthorized && h.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if status, b, _ = call(t, env, hc, tt.token, "POST", "/v1/registrations", reg); status != tt.written {
				t.Errorf("POST /v1/registrations: %d %s, want %d", status, b, tt.written)
			}
			if status, _, _ := call(t, env, hc, tt.token, "GET", "/v1/openapi.yaml", nil); status != http.StatusOK {
				t.Errorf("the OpenAPI document needs no credentials; got %d", status)
			}
		})
	}

	t.Run("a certificate of another CA authenticates nothing", func(t *testing.T) {
		// The client does not even send it: the server asks for
		// certificates of the fleet CA only.
		other, _ := pki.NewCA("other")
		stranger, _ := other.AdminCert("ops")
		if status, b, _ := call(t, env, env.HTTPClient(t, stranger), "", "GET", "/v1/pools", nil); status != http.StatusUnauthorized {
			t.Errorf("%d %s, want 401", status, b)
		}
	})
}

func TestProbesAndMetrics(t *testing.T) {
	env := discoverytest.Start(t, discoverytest.Options{Grace: time.Minute})
	probe := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		env.Server.Probes().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	if status, body := probe("/healthz"); status != 200 {
		t.Errorf("/healthz: %d %s", status, body)
	}
	if status, body := probe("/readyz"); status != http.StatusServiceUnavailable || !strings.Contains(body, "no registrations yet") {
		t.Errorf("/readyz before any registration: %d %s", status, body)
	}
	status, b, _ := call(t, env, nil, discoverytest.ReadToken, "GET", "/v1/pools", nil)
	if list := decode[discoveryv1.PoolList](t, b); status != 200 || list.Synced {
		t.Errorf("list before sync: %d %s", status, b)
	}
	register(t, env, discoverytest.Registration("demo", "echo", "east", "", "e1", "e2"))
	if status, body := probe("/readyz"); status != 200 || !strings.Contains(body, "1 registrations") {
		t.Errorf("/readyz after a registration: %d %s", status, body)
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(env.Metrics, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		"fleetnet_discovery_pools 1",
		"fleetnet_discovery_endpoints 2",
		"fleetnet_discovery_registrations 1",
		`fleetnet_discovery_requests_total{code="201",route="POST /v1/registrations"} 1`,
		`fleetnet_discovery_requests_total{code="200",route="GET /v1/pools"} 1`,
	} {
		if !strings.Contains(rec.Body.String(), want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	if problems, err := testutil.GatherAndLint(env.Metrics); err != nil || len(problems) > 0 {
		t.Errorf("metrics lint: %v %v", problems, err)
	}
}

func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	env := discoverytest.Start(t, discoverytest.Options{})
	var documented []string
	for path, item := range env.Validator.Doc().Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	slices.Sort(documented)
	served := []string{
		"DELETE /v1/registrations/{id}", "GET /v1/openapi.yaml", "GET /v1/pools", "GET /v1/pools/{namespace}/{name}",
		"GET /v1/routers", "GET /v1/watch", "POST /v1/registrations", "PUT /v1/registrations/{id}",
	}
	if diff := cmp.Diff(served, documented); diff != "" {
		t.Errorf("documented routes (-served +documented):\n%s", diff)
	}
}

// scopeBlind is a pool source that cannot tell an export's scope, as the
// kubernetes source.
type scopeBlind struct{ server.Backend }

func (scopeBlind) ClusterRefusal() string { return "this source cannot tell what a cluster may see" }

// TestClustersRefusedWhereScopesAreUnknown: with a source that cannot tell
// an export's scope (the kubernetes source), a cluster's certificate is
// refused with 403 naming why, on every read; administrators and read
// tokens read as before.
func TestClustersRefusedWhereScopesAreUnknown(t *testing.T) {
	var mem *memory.Memory
	env := discoverytest.Start(t, discoverytest.Options{Source: func(st *store.Store, _ prometheus.Registerer) server.Backend {
		mem = memory.New(memory.Config{Store: st, TTL: time.Minute})
		return scopeBlind{mem}
	}})
	if _, err := mem.Register(t.Context(), "test", discoverytest.Registration("demo", "echo", "east", "", "e1")); err != nil {
		t.Fatal(err)
	}
	cluster, _ := env.CA.ClusterCert("east")
	admin, _ := env.CA.AdminCert("ops")
	tests := []struct {
		name  string
		token string
		cert  *pki.KeyPair
		want  int
	}{
		{"member cluster's certificate", "", cluster, http.StatusForbidden},
		{"administrator's certificate", "", admin, http.StatusOK},
		{"read token", discoverytest.ReadToken, nil, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hc := env.HTTPClient(t, tt.cert)
			for _, path := range []string{"/v1/pools", "/v1/pools/demo/echo", "/v1/routers", "/v1/watch"} {
				req, _ := http.NewRequestWithContext(t.Context(), "GET", env.URL+path, nil)
				if tt.token != "" {
					req.Header.Set("Authorization", "Bearer "+tt.token)
				}
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != tt.want {
					t.Errorf("GET %s: %s, want %d", path, resp.Status, tt.want)
				}
				if resp.StatusCode == http.StatusForbidden {
					b, _ := io.ReadAll(resp.Body)
					if e := decode[discoveryv1.Error](t, b); !strings.Contains(e.Message, `cluster "east"`) || !strings.Contains(e.Message, "cannot tell what a cluster may see") {
						t.Errorf("GET %s: the refusal does not say why: %s", path, b)
					}
				}
				resp.Body.Close()
			}
		})
	}
}

// TestRegistrationCap: one identity holds at most --max-registrations-per-identity
// live registrations; one more is refused with 429 and counted, another
// identity is not held back, and a deregistration makes room.
func TestRegistrationCap(t *testing.T) {
	env := discoverytest.Start(t, discoverytest.Options{MaxRegistrations: 2})
	registrar := env.HTTPClient(t, discoverytest.ClientCert(t, env.CA, "model-server", discoveryv1.OrganizationRegister))
	reg := func(i int) discoveryv1.Registration {
		return discoverytest.Registration("demo", "echo", "east", "", "e"+strconv.Itoa(i))
	}
	var leases []discoveryv1.Lease
	for i := range 2 {
		leases = append(leases, register(t, env, reg(i)))
	}
	tests := []struct {
		name  string
		hc    *http.Client
		token string
		want  int
	}{
		{"the token's third", nil, discoverytest.RegisterToken, http.StatusTooManyRequests},
		{"another identity's first", registrar, "", http.StatusCreated},
		{"the token's third again", nil, discoverytest.RegisterToken, http.StatusTooManyRequests},
	}
	for i, tt := range tests {
		status, b, _ := call(t, env, tt.hc, tt.token, "POST", "/v1/registrations", reg(10+i))
		if status != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.name, status, b, tt.want)
		}
		if status == http.StatusTooManyRequests && !strings.Contains(decode[discoveryv1.Error](t, b).Message, "--max-registrations-per-identity") {
			t.Errorf("%s: the refusal does not name the limit: %s", tt.name, b)
		}
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(env.Metrics, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if want := "fleetnet_discovery_registrations_refused_total 2\n"; !strings.Contains(rec.Body.String(), want) {
		t.Errorf("metrics lack %q", want)
	}
	if status, b, _ := call(t, env, nil, discoverytest.RegisterToken, "DELETE", "/v1/registrations/"+leases[0].ID, nil); status != http.StatusNoContent {
		t.Fatalf("deregister: %d %s", status, b)
	}
	register(t, env, reg(20))
	// An expired lease makes room too.
	env.Clock.Step(time.Minute)
	register(t, env, reg(21))
}
