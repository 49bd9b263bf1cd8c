package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/miekg/dns"
	"github.com/spf13/pflag"
)

// parseFlags binds the options to a fresh flag set and parses args, as the
// command does.
func parseFlags(t *testing.T, args ...string) Options {
	t.Helper()
	var o Options
	fs := pflag.NewFlagSet("fleetnet-dns", pflag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestValidate(t *testing.T) {
	corefile := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(corefile, []byte("."), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string // substrings of the error; none means valid
	}{
		{args: nil},
		{args: []string{"--listen", "127.0.0.1:17453", "--zone", "fleet.example.", "--ttl", "30s", "--kubeconfig", "/k", "--context", "east",
			"--metrics-addr", "127.0.0.1:1", "--health-addr", "127.0.0.1:2", "--ready-addr", "127.0.0.1:3"}},
		{args: []string{"--listen", "[::1]:53", "--ttl", "0s"}},
		{args: []string{"--listen", "localhost:53"}, want: []string{`--listen="localhost:53": host must be an IP address`}},
		{args: []string{"--listen", "127.0.0.1"}, want: []string{`--listen="127.0.0.1":`}},
		{args: []string{"--listen", "127.0.0.1:0"}, want: []string{`--listen="127.0.0.1:0": port must be`}},
		{args: []string{"--zone", "Bad_Zone"}, want: []string{`--zone="Bad_Zone"`}},
		{args: []string{"--ttl", "1500ms"}, want: []string{"--ttl=1.5s: must be whole seconds"}},
		{args: []string{"--ttl", "2h"}, want: []string{"--ttl=2h0m0s"}},
		{args: []string{"--kubeconfig", "/a\"b"}, want: []string{"--kubeconfig="}},
		{args: []string{"--lameduck", "2m"}, want: []string{"--lameduck=2m0s: must be from 0s to 1m"}},
		{args: []string{"--context", "a b"}, want: []string{`--context="a b"`}},
		{args: []string{"--health-addr", ":9153"}, want: []string{`--health-addr=":9153": --metrics-addr has the same address`}},
		{args: []string{"--ready-addr", "nope"}, want: []string{`--ready-addr="nope"`}},
		{args: []string{"--corefile", corefile}},
		{args: []string{"--corefile", corefile, "--zone", "x.local", "--ttl", "5s"}, want: []string{"--corefile and --zone", "--corefile and --ttl"}},
		{args: []string{"--corefile", filepath.Join(t.TempDir(), "missing")}, want: []string{"--corefile="}},
	} {
		o := parseFlags(t, tc.args...)
		err := o.Validate()
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%v: %v", tc.args, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%v: no error, want %q", tc.args, tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q lacks %q", tc.args, err, w)
			}
		}
	}
}

func TestBuildCorefile(t *testing.T) {
	o := parseFlags(t, "--listen", "127.0.0.1:17453", "--zone", "ClusterSet.Local.", "--ttl", "7s", "--kubeconfig", "/dev fleet/east/kubeconfig",
		"--context", "east", "--metrics-addr", "127.0.0.1:17454", "--health-addr", "127.0.0.1:17455", "--ready-addr", "127.0.0.1:17456", "--log-queries",
		"--lameduck", "5s")
	want := `clusterset.local.:17453 {
    bind 127.0.0.1
    errors
    log
    health 127.0.0.1:17455 {
        lameduck 5s
    }
    ready 127.0.0.1:17456
    prometheus 127.0.0.1:17454
    cache 7
    fleetnet {
        kubeconfig "/dev fleet/east/kubeconfig" east
        ttl 7
    }
}
`
	if got := o.BuildCorefile(); got != want {
		t.Errorf("Corefile:\n%s\nwant:\n%s", got, want)
	}
	// Defaults: every interface, in-cluster configuration; no cache with a
	// zero TTL (the cache plugin refuses one).
	o = parseFlags(t, "--ttl", "0s")
	got := o.BuildCorefile()
	for _, absent := range []string{"bind", "cache", "kubeconfig", "log\n"} {
		if strings.Contains(got, absent) {
			t.Errorf("default Corefile has %q:\n%s", absent, got)
		}
	}
	if !strings.HasPrefix(got, "clusterset.local.:1053 {") {
		t.Errorf("default Corefile:\n%s", got)
	}
}

// TestServesBeforeTheAPIServerAnswers starts the whole server (CoreDNS and
// its plugins, in this process) with a kubeconfig whose API server does
// not answer: the probes and metrics are up at once, /ready says 503 and
// queries get SERVFAIL, never an NXDOMAIN that resolvers would cache.
// test/dns covers the answers with a real API server.
func TestServesBeforeTheAPIServerAnswers(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	// Port 1 on loopback: nothing listens, every list fails at once.
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	ports := testkit.FreePorts(t, 4)
	o := parseFlags(t, "--listen", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--kubeconfig", kubeconfig,
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", ports[1]), "--health-addr", fmt.Sprintf("127.0.0.1:%d", ports[2]),
		"--ready-addr", fmt.Sprintf("127.0.0.1:%d", ports[3]), "--lameduck", "1s")
	s, err := Start(o, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = s.Stop()
		}
	}()

	for _, tc := range []struct {
		port int
		path string
		code int
		body string
	}{
		{ports[2], "/health", http.StatusOK, "OK"},
		{ports[3], "/ready", http.StatusServiceUnavailable, "fleetnet"},
		{ports[1], "/metrics", http.StatusOK, "coredns_fleetnet_synced 0"},
	} {
		code, body := get(t, fmt.Sprintf("http://127.0.0.1:%d%s", tc.port, tc.path))
		if code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("%s: %d %q, want %d with %q", tc.path, code, firstLine(body, tc.body), tc.code, tc.body)
		}
	}
	for _, network := range []string{"udp", "tcp"} {
		c := &dns.Client{Net: network, Timeout: 2 * time.Second}
		m := new(dns.Msg)
		m.SetQuestion("web.demo.svc.clusterset.local.", dns.TypeA)
		r, _, err := c.Exchange(m, fmt.Sprintf("127.0.0.1:%d", ports[0]))
		if err != nil {
			t.Fatalf("%s query: %v", network, err)
		}
		if r.Rcode != dns.RcodeServerFailure {
			t.Errorf("%s: %s before the caches synced, want SERVFAIL", network, dns.RcodeToString[r.Rcode])
		}
	}

	// Stopping: the lameduck second still answers, then the listeners close.
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- s.Stop() }()
	stopped = true
	time.Sleep(300 * time.Millisecond)
	m := new(dns.Msg)
	m.SetQuestion("web.demo.svc.clusterset.local.", dns.TypeA)
	if _, _, err := (&dns.Client{Timeout: time.Second}).Exchange(m, fmt.Sprintf("127.0.0.1:%d", ports[0])); err != nil {
		t.Errorf("no answer during the lameduck period: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("stop: %v", err)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("stopped after %s, before the lameduck second", d)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	var code int
	var body string
	testkit.Eventually(t, time.Second, "GET "+url+" to answer", func(context.Context) error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code, body = resp.StatusCode, string(b)
		return nil
	})
	return code, body
}

// firstLine is the line of body holding want, or the start of body, for an
// error message shorter than a whole metrics page.
func firstLine(body, want string) string {
	for l := range strings.SplitSeq(body, "\n") {
		if strings.Contains(l, strings.Fields(want)[0]) {
			return l
		}
	}
	return body[:min(len(body), 200)]
}
