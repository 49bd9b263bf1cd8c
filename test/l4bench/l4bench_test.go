package main

import (
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	rs := []result{{Ops: 30, Seconds: 1}, {Ops: 10, Seconds: 1}, {Ops: 40, Seconds: 2}}
	if got := median(rs, opsOf); got.Ops != 40 { // rates 30, 10, 20
		t.Errorf("median %+v, want the one of rate 20", got)
	}
	if median(nil, opsOf) != nil {
		t.Error("median of nothing")
	}
}

// The haproxy configuration names every backend (the benchmark also runs
// haproxy's own check of it, haproxy -c, before the load).
func TestHAProxyConfig(t *testing.T) {
	var sb strings.Builder
	if err := haproxyConfig.Execute(&sb, map[string]any{"Dir": t.TempDir(), "Listen": "127.0.0.1:1", "Threads": 2, "Backends": []string{"127.0.0.1:2", "127.0.0.1:3"}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mode tcp", "nbthread 2", "bind 127.0.0.1:1", "server s0 127.0.0.1:2 check", "server s1 127.0.0.1:3 check"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("configuration lacks %q:\n%s", want, sb.String())
		}
	}
}

// The haproxy pair's configuration: TLS 1.3 both ways with verified
// certificates, the ingress frontend balancing every backend.
func TestHAProxyPairConfig(t *testing.T) {
	var sb strings.Builder
	if err := haproxyPairConfig.Execute(&sb, map[string]any{"Dir": "/d", "Listen": "127.0.0.1:1", "Ingress": "127.0.0.1:4", "Threads": 0, "Backends": []string{"127.0.0.1:2", "127.0.0.1:3"}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ssl-min-ver TLSv1.3", "bind 127.0.0.1:1", "server west 127.0.0.1:4 ssl crt /d/hub.pem ca-file /d/ca.crt verify required verifyhost west",
		"bind 127.0.0.1:4 ssl crt /d/west.pem ca-file /d/ca.crt verify required", "server s0 127.0.0.1:2 check", "server s1 127.0.0.1:3 check"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("configuration lacks %q:\n%s", want, sb.String())
		}
	}
}
