package server

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/console/model"
	"github.com/fleetnet/fleetnet/internal/tokenfile"
)

const token = "server-test-token-0123456789"

func serve(t *testing.T) (*model.Model, *Authenticator, *httptest.Server) {
	t.Helper()
	m := model.New()
	auth := NewAuthenticator(time.Hour)
	auth.SetTokens([]tokenfile.Entry{{Token: token, Name: "tester", Role: RoleRead}})
	s := New(Config{Model: m, Auth: auth, Coalesce: 10 * time.Millisecond, Heartbeat: time.Hour})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.Stop()
		ts.Close()
	})
	return m, auth, ts
}

func get(t *testing.T, url string, header ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestLoginAndSessions(t *testing.T) {
	_, auth, ts := serve(t)
	resp := get(t, ts.URL+"/?token="+token)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("login: %s to %q, want 303 to /", resp.Status, resp.Header.Get("Location"))
	}
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == SessionCookie {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.MaxAge != 3600 {
		t.Fatalf("session cookie %+v", session)
	}
	if got := resp.Header.Get("Referrer-Policy"); got != "no-referrer" {
		t.Errorf("Referrer-Policy %q: the login URL's token could leak", got)
	}
	for _, tc := range []struct {
		name   string
		header []string
		want   int
	}{
		{"session", []string{"Cookie", SessionCookie + "=" + session.Value}, http.StatusOK},
		{"bearer", []string{"Authorization", "Bearer " + token}, http.StatusOK},
		{"unknown session", []string{"Cookie", SessionCookie + "=forged"}, http.StatusUnauthorized},
		{"wrong bearer", []string{"Authorization", "Bearer nope-nope-nope-nope"}, http.StatusUnauthorized},
		{"basic", []string{"Authorization", "Basic " + token}, http.StatusUnauthorized},
		{"nothing", nil, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := get(t, ts.URL+"/api/fleet", tc.header...)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s, want %d", resp.Status, tc.want)
			}
		})
	}
	// A session ends at its time.
	auth.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	resp = get(t, ts.URL+"/api/fleet", "Cookie", SessionCookie+"="+session.Value)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an expired session: %s, want 401", resp.Status)
	}
}

func TestBadRequests(t *testing.T) {
	_, _, ts := serve(t)
	for _, url := range []string{"/api/services?limit=100000", "/api/services?offset=-1", "/api/services?q=is:nothing", "/api/services/Bad_NS/x"} {
		resp := get(t, ts.URL+url, "Authorization", "Bearer "+token)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s: %s, want 400", url, resp.Status)
		}
	}
}

func TestEventsFollowTheModel(t *testing.T) {
	m, _, ts := serve(t)
	resp := get(t, ts.URL+"/api/events", "Authorization", "Bearer "+token)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	events := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- d
			}
		}
		close(events)
	}()
	next := func() string {
		select {
		case d := <-events:
			return d
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
		}
		return ""
	}
	if first := next(); first != "0" {
		t.Errorf("first event %q, want the revision 0", first)
	}
	m.SetClusters([]*registryv1.Cluster{{Id: "east", Live: true}})
	if d := next(); d != "1" {
		t.Errorf("after a change: %q, want 1", d)
	}
}
