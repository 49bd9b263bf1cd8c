package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFinalLine(t *testing.T) {
	var s summary
	s.Throughput.Plain, s.Throughput.TLS, s.Throughput.H2 = 0.5234, 0.6061, 0.4
	s.AddedP99.Edge = 3214 * time.Microsecond
	if got, want := finalLine(s), "edge/nginx: plain=0.52 tls=0.61 h2=0.40 added-p99-at-50%=3.21ms"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	s.AddedP99.Edge = -50 * time.Microsecond
	if got := finalLine(s); !strings.HasSuffix(got, " added-p99-at-50%=-0.05ms") {
		t.Errorf("a negative added p99: %q", got)
	}
}

// TestPlan: every open-loop run comes after the saturated run its rate is
// taken from and after the direct backend's run it is compared with.
func TestPlan(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range plan() {
		if seen[r.key()] {
			t.Fatalf("%s twice in a round", r.label())
		}
		if r.tool == toolOpen && (!seen[nginxPlain.key()] || r.proxy != "direct" && !seen[r.direct().key()]) {
			t.Fatalf("%s comes before what it needs", r.label())
		}
		seen[r.key()] = true
	}
	for _, want := range []run{
		{proxy: "edge", tls: true, tool: toolH2load}, {logs: true, proxy: "nginx", tls: true, tool: toolH2load},
		{proxy: "edge", tool: toolOpen, pct: 50}, {logs: true, proxy: "edge", tool: toolOpen, pct: 50},
	} {
		if !seen[want.key()] {
			t.Errorf("no %s", want.label())
		}
	}
}

// TestReport: the tables are medians of the rounds, the added latency the
// median of each round's difference, and the last line the final line.
func TestReport(t *testing.T) {
	runs := plan()
	var rounds []map[string]measure
	for i := range 3 {
		round := map[string]measure{}
		for _, r := range runs {
			m := measure{RPS: 1000, CPU: 20 * time.Microsecond, P99: time.Millisecond}
			switch {
			case r.proxy == "edge" && r.tool == toolWrk && !r.tls:
				m.RPS = []float64{400, 600, 500}[i] // median 500
			case r.proxy == "edge" && r.tool == toolWrk:
				m.RPS = 250
			case r.proxy == "edge" && r.tool == toolH2load:
				m.RPS = 125
			case r.proxy == "direct":
				// Rounds differ; each round's edge is 2 ms over it.
				m.P99 = time.Duration(i+1) * time.Millisecond
			case r.proxy == "edge" && r.tool == toolOpen:
				m.P99 = time.Duration(i+3) * time.Millisecond
			}
			if r.proxy == "edge" {
				m.CPU = 60 * time.Microsecond
			}
			round[r.key()] = m
		}
		rounds = append(rounds, round)
	}
	var out bytes.Buffer
	report(&out, runs, rounds)
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if got, want := lines[len(lines)-1], "edge/nginx: plain=0.50 tls=0.25 h2=0.12 added-p99-at-50%=2.00ms"; got != want {
		t.Errorf("last line %q, want %q\n%s", got, want, out.String())
	}
	if !strings.Contains(out.String(), "CPU per request plain 3.00, TLS 3.00, h2 3.00") {
		t.Errorf("no CPU ratio of 3:\n%s", out.String())
	}
}

func TestParseProcStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	const stat = "4242 (nginx: worker (x)) S 4240 4240 4240 0 -1 4194624 812 0 0 0 150 75 0 0 20 0 1 0 123 0 0"
	ppid, cpu, err := parseProcStat(stat)
	if err != nil || ppid != 4240 || cpu != 2250*time.Millisecond {
		t.Fatalf("got %d, %v, %v; want 4240, 2.25s", ppid, cpu, err)
	}
	if _, _, err := parseProcStat("4242 (nginx) S 1"); err == nil {
		t.Fatal("a short stat parsed")
	}
}

func TestNginxConfig(t *testing.T) {
	servers := []nginxServer{{Plain: "127.0.0.1:1", TLS: "127.0.0.1:2"}, {Plain: "127.0.0.1:3", TLS: "127.0.0.1:4", AccessLog: "/d/access.log"}}
	for version, want := range map[string]string{
		"nginx/1.22.1": "listen 127.0.0.1:2 ssl http2 reuseport;",
		"nginx/1.25.1": "listen 127.0.0.1:2 ssl reuseport;\n\t\thttp2 on;",
		"nginx/1.27.4": "listen 127.0.0.1:2 ssl reuseport;\n\t\thttp2 on;",
		"unknown":      "http2 on;",
	} {
		conf, err := renderNginxConfig(version, "/d", 2, servers, []string{"127.0.0.1:9"})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{want, "worker_processes 2;", "ssl_protocols TLSv1.3;", "ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;",
			"keepalive 256;", "access_log off;", "access_log /d/access.log combined buffer=64k flush=1s;", "server 127.0.0.1:9;"} {
			if !strings.Contains(string(conf), s) {
				t.Errorf("%s: no %q in\n%s", version, s, conf)
			}
		}
		if n := strings.Count(string(conf), "keepalive_requests 1000000;"); n != 2 {
			t.Errorf("%s: keepalive_requests raised %d times, want for clients and upstreams", version, n)
		}
	}
}

func TestSelectRuns(t *testing.T) {
	for _, tc := range []struct {
		only    string
		want    []string // labels
		wantErr bool
	}{
		{only: "off +edge plain +wrk", want: []string{"logs off  edge plain   wrk     "}},
		{only: "on +edge plain +open 50", want: []string{"logs off  nginx plain  wrk     ", "logs on   edge plain   open 50%"}},
		{only: "no such run", wantErr: true},
		{only: "(", wantErr: true},
	} {
		t.Run(tc.only, func(t *testing.T) {
			got, err := selectRuns(plan(), tc.only)
			if (err != nil) != tc.wantErr {
				t.Fatalf("selectRuns(%q) error %v, want error %v", tc.only, err, tc.wantErr)
			}
			var labels []string
			for _, r := range got {
				labels = append(labels, r.label())
			}
			if !slices.Equal(labels, tc.want) {
				t.Errorf("selectRuns(%q) = %q, want %q", tc.only, labels, tc.want)
			}
		})
	}
}
