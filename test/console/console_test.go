// Package console tests fleetnet-console's web UI in a real browser
// (headless chromium, chromedp) against the console's own server, fed a
// model made here: what a person sees, live updates without a reload,
// login, and that text from the fleet can't become markup. The same UI on
// a local fleet's real feeds is tested in test/e2e (TestConsole).
package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/console/model"
	"github.com/fleetnet/fleetnet/internal/console/server"
	"github.com/fleetnet/fleetnet/internal/testkit/browser"
	"github.com/fleetnet/fleetnet/internal/tokenfile"
)

const token = "console-test-token-0123456789"

// console serves a console of m and returns its base URL.
func console(t testing.TB, m *model.Model) string {
	t.Helper()
	auth := server.NewAuthenticator(0)
	auth.SetTokens([]tokenfile.Entry{{Token: token, Name: "tester", Role: server.RoleRead}})
	s := server.New(server.Config{Model: m, Auth: auth, Coalesce: 50 * time.Millisecond})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.Stop()
		ts.Close()
	})
	return ts.URL
}

// synthetic fills m with clusters (in regions of 10) and services, each
// exported by three clusters; every 100th service is in conflict, and
// demo/evil's conflict message is markup.
func synthetic(m *model.Model, clusters, services int) {
	var cs []*registryv1.Cluster
	for i := range clusters {
		cs = append(cs, &registryv1.Cluster{Id: fmt.Sprintf("cluster-%03d", i), Region: fmt.Sprintf("region-%d", i/10), Live: true, AgentVersion: "v0.1.0"})
	}
	m.SetClusters(cs)
	var exports []*registryv1.Export
	var statuses []*registryv1.ExportStatus
	st := model.NewImportState()
	add := func(ns, name string, conflict *registryv1.Conflict, exporters ...string) {
		imp := &registryv1.Import{Key: &registryv1.ImportKey{Namespace: ns, Name: name}, Type: "ClusterSetIP",
			Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}}
		for _, c := range exporters {
			k := &registryv1.ExportKey{Namespace: ns, Name: name, ClusterId: c}
			exports = append(exports, &registryv1.Export{Key: k, Weight: 1, Type: "ClusterSetIP"})
			s := &registryv1.ExportStatus{Key: k, Participating: true}
			if conflict != nil {
				s.Conflicts = []*registryv1.Conflict{conflict}
			}
			statuses = append(statuses, s)
			imp.Clusters = append(imp.Clusters, &registryv1.ImportCluster{ClusterId: c, Weight: 1})
			st.Apply(&registryv1.WatchEvent{Event: &registryv1.WatchEvent_EndpointsUpsert{EndpointsUpsert: &registryv1.EndpointChunk{
				Key: &registryv1.ChunkKey{Namespace: ns, Name: name, ClusterId: c, Chunk: "a"},
				Endpoints: []*registryv1.Endpoint{
					{Addresses: []string{"10.0.0.1"}, Conditions: &registryv1.EndpointConditions{Ready: true}},
					{Addresses: []string{"10.0.0.2"}, Conditions: &registryv1.EndpointConditions{Ready: true}},
				},
			}}})
		}
		if conflict != nil {
			imp.Conflicts = []*registryv1.Conflict{conflict}
		}
		st.Apply(&registryv1.WatchEvent{Event: &registryv1.WatchEvent_ImportUpsert{ImportUpsert: imp}})
	}
	for i := range services {
		var conflict *registryv1.Conflict
		if i%100 == 99 {
			conflict = &registryv1.Conflict{Reason: "Port", Message: fmt.Sprintf("ports differ: [http 80/TCP] in cluster-%03d, [http 81/TCP] in cluster-%03d", i%clusters, (i+1)%clusters)}
		}
		add(fmt.Sprintf("ns-%d", i/500), fmt.Sprintf("svc-%05d", i), conflict,
			fmt.Sprintf("cluster-%03d", i%clusters), fmt.Sprintf("cluster-%03d", (i+1)%clusters), fmt.Sprintf("cluster-%03d", (i+2)%clusters))
	}
	add("demo", "evil", &registryv1.Conflict{Reason: "Type", Message: `<img src=x id=injected onerror="document.title='owned'">`}, "cluster-000", "cluster-001")
	m.SetExports(exports, statuses)
	m.ReplaceImports(st)
}

// login opens base with the token and waits for the fleet page.
func login(t testing.TB, ctx context.Context, base string) {
	t.Helper()
	browser.Do(t, ctx, "log in",
		chromedp.Navigate(base+"/?token="+token),
		chromedp.WaitVisible(chromedp.CSS(`[data-cluster]`)),
	)
}

func TestConsolePages(t *testing.T) {
	m := model.New()
	synthetic(m, 12, 300)
	base := console(t, m)
	ctx := browser.New(t)
	login(t, ctx, base)

	// The token is gone from the address bar: exchanged for a session
	// cookie that scripts can't read.
	if location := browser.Get(t, ctx, "location", chromedp.Location()); strings.Contains(location, token) {
		t.Errorf("the login token stayed in the address bar: %s", location)
	}
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	if c := cookies.Cookies; len(c) != 1 || c[0].Name != server.SessionCookie || !c[0].HTTPOnly || c[0].SameSite != network.CookieSameSiteStrict {
		t.Errorf("cookies after login %+v, want one HttpOnly SameSite=Strict %s", c, server.SessionCookie)
	}

	// The fleet: clusters by region, the totals.
	regions := browser.Eval[int](t, ctx, `document.querySelectorAll("section.region").length`)
	stats := browser.Text(t, ctx, `.stats`)
	if regions != 2 || !strings.Contains(stats, "12 / 12") || !strings.Contains(stats, "301") {
		t.Errorf("fleet page: %d regions, stats %q; want 2 regions, 12 / 12 clusters live, 301 services", regions, stats)
	}
	if v := browser.Text(t, ctx, `[data-cluster="cluster-000"] .agent-version`); v != "v0.1.0" {
		t.Errorf("cluster-000's card shows agent version %q, want v0.1.0", v)
	}
	browser.Screenshot(t, ctx, "console-fleet-synthetic")

	// A marker that a reload would lose: the updates below must come
	// without one.
	browser.Eval[bool](t, ctx, `window.notReloaded = true`)

	// The services: search, page, a service's exporters, a conflict.
	browser.Do(t, ctx, "services",
		chromedp.Click(chromedp.CSS(`nav a[data-nav="services"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#range`)),
	)
	if r := browser.Text(t, ctx, `#range`); r != "1–50 of 301" {
		t.Errorf("services range %q, want 1–50 of 301", r)
	}
	browser.Do(t, ctx, "search is:conflict",
		chromedp.SendKeys(chromedp.CSS(`#search`), "is:conflict ns-0/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-service="ns-0/svc-00099"]`)),
	)
	if c := browser.Text(t, ctx, `tr[data-service="ns-0/svc-00099"] td.conflicts`); !strings.Contains(c, "Port: ports differ: [http 80/TCP] in cluster-003, [http 81/TCP] in cluster-004") {
		t.Errorf("conflict shown as %q", c)
	}
	// ns-0 holds all 300: svc-00099, 00199 and 00299 are in conflict.
	if r := browser.Text(t, ctx, `#range`); r != "1–3 of 3" {
		t.Errorf("is:conflict ns-0/ found %q, want 1–3 of 3", r)
	}
	browser.Do(t, ctx, "a service's page",
		chromedp.Click(chromedp.CSS(`tr[data-service="ns-0/svc-00099"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`.page.service[data-service="ns-0/svc-00099"]`)),
	)
	if e := browser.Eval[string](t, ctx, `[...document.querySelectorAll("table.exporting tbody tr")].map(r => r.dataset.cluster).join(",")`); e != "cluster-003,cluster-004,cluster-005" {
		t.Errorf("svc-00099's exporting clusters %q, want cluster-003,cluster-004,cluster-005", e)
	}
	// Laid out as a table (a class of the fleet page's grid once broke it).
	if d := browser.Eval[string](t, ctx, `getComputedStyle(document.querySelector("table.exporting")).display`); d != "table" {
		t.Errorf("the exporting clusters' table is laid out as %q", d)
	}
	browser.Screenshot(t, ctx, "console-service-synthetic")

	// Live: cluster-004's lease expires; the registry takes it out of the
	// import. The open page follows without a reload.
	cs := []*registryv1.Cluster{}
	for i := range 12 {
		cs = append(cs, &registryv1.Cluster{Id: fmt.Sprintf("cluster-%03d", i), Region: fmt.Sprintf("region-%d", i/10), Live: i != 4})
	}
	m.SetClusters(cs)
	m.ApplyImportEvent(&registryv1.WatchEvent{Event: &registryv1.WatchEvent_ImportUpsert{ImportUpsert: &registryv1.Import{
		Key: &registryv1.ImportKey{Namespace: "ns-0", Name: "svc-00099"}, Type: "ClusterSetIP",
		Clusters: []*registryv1.ImportCluster{{ClusterId: "cluster-003", Weight: 1}, {ClusterId: "cluster-005", Weight: 1}},
	}}})
	browser.Do(t, ctx, "the page follows cluster-004 leaving",
		chromedp.WaitVisible(chromedp.CSS(`tr[data-cluster="cluster-004"][data-in-import="false"]`)))
	if !browser.Eval[bool](t, ctx, `window.notReloaded === true`) {
		t.Error("the page reloaded to show the change")
	}

	// Markup in a conflict message stays text.
	browser.Do(t, ctx, "a conflict message with markup",
		chromedp.Navigate(base+"/#/services/demo/evil"),
		chromedp.WaitVisible(chromedp.CSS(`.conflicts li`)),
	)
	if browser.Eval[bool](t, ctx, `document.getElementById("injected") !== null`) || browser.Get(t, ctx, "title", chromedp.Title()) == "owned" {
		t.Error("a conflict message's markup became an element of the page")
	}
	if li := browser.Text(t, ctx, `.conflicts li`); !strings.Contains(li, `<img src=x`) {
		t.Errorf("the conflict message is not shown as text: %q", li)
	}
}

func TestConsoleNeedsLogin(t *testing.T) {
	m := model.New()
	synthetic(m, 3, 3)
	base := console(t, m)
	ctx := browser.New(t)
	browser.Do(t, ctx, "open without a token", chromedp.Navigate(base+"/"))
	body := browser.Text(t, ctx, `main`)
	if !strings.Contains(body, "Not logged in") || !strings.Contains(body, "fleetnetctl dev status") {
		t.Errorf("page without a session: %q", body)
	}
	browser.Do(t, ctx, "a wrong token", chromedp.Navigate(base+"/?token=not-the-token-0123456789"))
	if body := browser.Text(t, ctx, `main`); !strings.Contains(body, "Not logged in") {
		t.Errorf("a wrong token logged in: %q", body)
	}
	for _, path := range []string{"/api/fleet", "/api/services", "/api/services/demo/evil", "/api/entrypoints", "/api/events"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without a session: %s, want 401", path, resp.Status)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/api/fleet", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /api/fleet with the bearer token: %s", resp.Status)
	}
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(method, base+"/api/fleet", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s /api/fleet: %s, want 405 (the console is read-only)", method, resp.Status)
		}
	}
}
