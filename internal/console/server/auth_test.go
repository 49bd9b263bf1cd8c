package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/console/model"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/internal/tokenfile"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// tlsConsole is a console served over TLS on loopback, taking client
// certificates of a fleet CA as fleetnet-console does with
// --client-ca-file.
type tlsConsole struct {
	url     string
	ca      *pki.KeyPair
	auth    *Authenticator
	metrics *prometheus.Registry
}

func serveTLS(t *testing.T, cfg Config) *tlsConsole {
	t.Helper()
	ca, err := pki.NewCA("fleet")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.ServingCert("console", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := serving.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := pki.ServerTLS(cert, ca.CertPEM, false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Auth == nil {
		cfg.Auth = NewAuthenticator(time.Hour)
		cfg.Auth.SetTokens([]tokenfile.Entry{{Token: token, Name: "tester", Role: RoleRead}})
	}
	reg := prometheus.NewRegistry()
	cfg.Model, cfg.Coalesce, cfg.Heartbeat, cfg.Registerer = model.New(), 10*time.Millisecond, time.Hour, reg
	cfg.Log = slog.New(slog.DiscardHandler)
	s := New(cfg)
	hs := httptest.NewUnstartedServer(s.Handler())
	hs.TLS = tlsCfg
	hs.StartTLS()
	t.Cleanup(func() {
		s.Stop()
		hs.Close()
	})
	return &tlsConsole{url: hs.URL, ca: ca, auth: cfg.Auth, metrics: reg}
}

// client presents kp (nil: no certificate) and follows no redirect.
func (c *tlsConsole) client(t *testing.T, kp *pki.KeyPair) *http.Client {
	t.Helper()
	var cert *tls.Certificate
	if kp != nil {
		tc, err := kp.TLSCertificate()
		if err != nil {
			t.Fatal(err)
		}
		cert = &tc
	}
	cfg, err := pki.ClientTLS(c.ca.CertPEM, cert)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: cfg}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (c *tlsConsole) get(t *testing.T, hc *http.Client, path string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, c.url+path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		return resp.StatusCode, "" // a stream: not read to its end
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestCertificates: the console lets in certificates named for it (its
// own organization, an administrator's) and refuses, with 403 naming why,
// the fleet CA's other certificates: a member cluster's, an edge's. A
// certificate without a name is refused as no identity.
func TestCertificates(t *testing.T) {
	c := serveTLS(t, Config{})
	must := func(kp *pki.KeyPair, err error) *pki.KeyPair {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	tests := []struct {
		name string
		cert *pki.KeyPair
		want int
		why  string // a part of the refusal
	}{
		{"the console's organization", must(c.ca.ConsoleCert("alice")), http.StatusOK, ""},
		{"an administrator's", must(c.ca.AdminCert("ops")), http.StatusOK, ""},
		{"a member cluster's", must(c.ca.ClusterCert("east")), http.StatusForbidden, keys.OrganizationClusters},
		{"an edge's", must(c.ca.EdgeCert("edge-0")), http.StatusForbidden, keys.OrganizationEdges},
		{"the console's organization without a name", must(c.ca.ConsoleCert("")), http.StatusUnauthorized, "empty common name"},
		{"an administrator's without a name", must(c.ca.AdminCert("")), http.StatusUnauthorized, "empty common name"},
		{"none", nil, http.StatusUnauthorized, "not logged in"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hc := c.client(t, tt.cert)
			for _, path := range []string{"/api/fleet", "/api/services", "/api/events", "/"} {
				status, body := c.get(t, hc, path)
				if status != tt.want {
					t.Errorf("GET %s: %d %s, want %d", path, status, body, tt.want)
				}
				if tt.why != "" && path != "/" && !strings.Contains(body, tt.why) {
					t.Errorf("GET %s: the refusal does not say why (%q): %s", path, tt.why, body)
				}
			}
		})
	}
}

// TestSessionEndsWithItsToken: a session lasts while the token that opened
// it is in the tokens file: once a reload of the file drops the token, the
// session's calls are refused and its open event stream ends, while the
// session of a token that stays goes on.
func TestSessionEndsWithItsToken(t *testing.T) {
	const kept = "kept-token-0123456789"
	path := filepath.Join(t.TempDir(), "tokens.csv")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path+".new", []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	write(token + ",tester,read\n" + kept + ",keeper,read\n")
	auth := NewAuthenticator(time.Hour)
	// As fleetnet-console's --tokens-file is loaded, and reloaded.
	load := func() error {
		entries, err := tokenfile.Load(path, RoleRead)
		if err == nil {
			auth.SetTokens(entries)
		}
		return err
	}
	if err := load(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tokenfile.Watch(ctx, path, 5*time.Millisecond, load, slog.New(slog.DiscardHandler))
	c := serveTLS(t, Config{Auth: auth})
	hc := c.client(t, nil)

	login := func(tok string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, c.url+"/?token="+tok, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, ck := range resp.Cookies() {
			if ck.Name == SessionCookie {
				return SessionCookie + "=" + ck.Value
			}
		}
		t.Fatalf("login with a token: %s, no session cookie", resp.Status)
		return ""
	}
	dropped, stays := login(token), login(kept)
	for _, s := range []string{dropped, stays} {
		if status, body := c.get(t, hc, "/api/fleet", "Cookie", s); status != http.StatusOK {
			t.Fatalf("a fresh session: %d %s", status, body)
		}
	}
	stream, _ := openStream(t, c, hc, "Cookie", dropped)

	write(kept + ",keeper,read\n")
	testkit.Until(t, 10*time.Second, "the session of the dropped token refused", func() bool {
		status, _ := c.get(t, hc, "/api/fleet", "Cookie", dropped)
		return status == http.StatusUnauthorized
	})
	select {
	case <-stream:
	case <-time.After(10 * time.Second):
		t.Error("the event stream of the dropped token's session is still open")
	}
	if status, body := c.get(t, hc, "/api/fleet", "Cookie", stays); status != http.StatusOK {
		t.Errorf("the session of the token that stays: %d %s", status, body)
	}
	// The token comes back: the session it opened stays ended.
	write(token + ",tester,read\n" + kept + ",keeper,read\n")
	testkit.Until(t, 10*time.Second, "the token back", func() bool {
		status, _ := c.get(t, hc, "/api/fleet", "Authorization", "Bearer "+token)
		return status == http.StatusOK
	})
	if status, _ := c.get(t, hc, "/api/fleet", "Cookie", dropped); status != http.StatusUnauthorized {
		t.Errorf("an ended session came back with its token: %d", status)
	}
}

// openStream opens /api/events and returns a channel closed when the
// stream ends, and a function that closes it; the first event has been
// read.
func openStream(t *testing.T, c *tlsConsole, hc *http.Client, header ...string) (<-chan struct{}, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url+"/api/events", nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET /api/events: %s %s", resp.Status, b)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "data: ") {
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for sc.Scan() {
		}
	}()
	stop := func() {
		cancel()
		resp.Body.Close()
		<-ended
	}
	t.Cleanup(stop)
	return ended, stop
}

// TestEventStreamCaps: one session holds at most MaxStreamsPerSession
// event streams (429), the console MaxStreams in all (503); each refusal
// is counted by its limit, and a closed stream makes room.
func TestEventStreamCaps(t *testing.T) {
	auth := NewAuthenticator(time.Hour)
	const other = "other-token-0123456789"
	auth.SetTokens([]tokenfile.Entry{{Token: token, Name: "tester", Role: RoleRead}, {Token: other, Name: "other", Role: RoleRead}})
	c := serveTLS(t, Config{Auth: auth, MaxStreams: 3, MaxStreamsPerSession: 2})
	hc := c.client(t, nil)
	session := SessionCookie + "=" + auth.login("tester", token)
	status := func(header ...string) int {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url+"/api/events", nil)
		req.Header.Set(header[0], header[1])
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	openStream(t, c, hc, "Cookie", session)
	_, closeSecond := openStream(t, c, hc, "Cookie", session)
	if got := status("Cookie", session); got != http.StatusTooManyRequests {
		t.Errorf("a third stream of one session: %d, want 429", got)
	}
	openStream(t, c, hc, "Authorization", "Bearer "+other)
	if got := status("Authorization", "Bearer "+other); got != http.StatusServiceUnavailable {
		t.Errorf("a fourth stream in all: %d, want 503", got)
	}
	want := `
# HELP fleetnet_console_event_streams_refused_total Event streams refused because their session, or the console, held as many as it may.
# TYPE fleetnet_console_event_streams_refused_total counter
fleetnet_console_event_streams_refused_total{limit="session"} 1
fleetnet_console_event_streams_refused_total{limit="total"} 1
`
	if err := testutil.GatherAndCompare(c.metrics, strings.NewReader(want), "fleetnet_console_event_streams_refused_total"); err != nil {
		t.Error(err)
	}
	closeSecond()
	testkit.Until(t, 10*time.Second, "room for the session's stream again", func() bool {
		return status("Cookie", session) == http.StatusOK
	})
}
