package ctl_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/internal/ctl"
	"github.com/fleetnet/fleetnet/internal/discovery/discoverytest"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// discoveryEnv is a real fleetnet-discovery API server (memory source, TLS
// with a fleet CA, tokens) and the flags that reach it.
type discoveryEnv struct {
	*discoverytest.Env
	flags []string
}

func startDiscovery(t *testing.T) *discoveryEnv {
	t.Helper()
	e := discoverytest.Start(t, discoverytest.Options{Routers: []discoveryv1.Router{
		{InstanceID: "router-0", Addresses: []string{"10.9.0.1"}, Cluster: "east", Region: "eu-west-1", Zone: "eu-west-1a", Ready: true,
			Ports: []discoveryv1.Port{{Name: "grpc", Port: 9000, Protocol: "TCP"}}},
	}})
	dir := t.TempDir()
	if err := e.CA.Write(dir, "ca"); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte(discoverytest.ReadToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &discoveryEnv{Env: e, flags: []string{"--server", e.URL, "--ca-file", filepath.Join(dir, "ca.crt"), "--token-file", token}}
}

// register registers pool demo/echo's members in cluster.
func (e *discoveryEnv) register(t *testing.T, cluster, region string, ids ...string) string {
	t.Helper()
	reg := discoverytest.Registration("demo", "echo", cluster, region, ids...)
	reg.Labels = map[string]string{"tier": "web"}
	l, err := e.Client(t, discoverytest.RegisterToken, nil).Register(t.Context(), reg)
	if err != nil {
		t.Fatal(err)
	}
	return l.ID
}

func (e *discoveryEnv) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := ctl.NewRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	// The test's own flags come last, so that they win over the env's.
	full := append([]string{"discovery", args[0]}, e.flags...)
	cmd.SetArgs(append(full, args[1:]...))
	err := cmd.ExecuteContext(t.Context())
	return out.String(), err
}

func TestDiscoveryPoolsAndRouters(t *testing.T) {
	e := startDiscovery(t)
	e.register(t, "east", "eu-west-1", "echo-0", "echo-1")
	e.register(t, "west", "us-west-2", "echo-2")
	rev := e.Store.Revision()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"pools", []string{"pools"}, fmt.Sprintf(`
NAMESPACE  NAME  CLUSTER  REGION     READY  REVISION
demo       echo  east     eu-west-1  2/2    %[1]d
demo       echo  west     us-west-2  1/1    %[1]d
`, rev)},
		{"pools in a region, wide", []string{"pools", "-n", "demo", "-l", "tier=web", "--region", "us-west-2", "-o", "wide"}, fmt.Sprintf(`
NAMESPACE  NAME  CLUSTER  REGION     READY  REVISION  ZONES  PORTS            INSTANCES  LABELS
demo       echo  west     us-west-2  1/1    %d  -      http:8080/TCP  echo-2     tier=web
`, rev)},
		{"no pool matches", []string{"pools", "-l", "tier=db"}, `
NAMESPACE  NAME  CLUSTER  REGION  READY  REVISION
`},
		{"one pool, one region", []string{"pools", "demo/echo", "--region", "eu-west-1"}, fmt.Sprintf(`
NAMESPACE  NAME  CLUSTER  REGION     READY  REVISION
demo       echo  east     eu-west-1  2/2    %d
`, rev)},
		{"routers", []string{"routers", "-o", "wide"}, `
INSTANCE  CLUSTER  REGION     ADDRESS   PORTS           READY  ZONE        ADDRESSES
router-0  east     eu-west-1  10.9.0.1  grpc:9000/TCP  true   eu-west-1a  10.9.0.1
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.run(t, tt.args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if diff := cmp.Diff(normalizeSpaces(tt.want), normalizeSpaces(out)); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}

	// json and yaml print the API's answer.
	_, want := e.Store.List(nil)
	for _, format := range []string{"json", "yaml"} {
		out, err := e.run(t, "pools", "-o", format)
		if err != nil {
			t.Fatalf("-o %s: %v\n%s", format, err, out)
		}
		var got discoveryv1.PoolList
		if err := yaml.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("-o %s: %v\n%s", format, err, out)
		}
		if !got.Synced || got.Revision != rev || len(got.Pools) != 1 || !cmp.Equal(got.Pools[0], *want[0]) {
			t.Errorf("-o %s: %+v, want the pool %+v at revision %d", format, got, *want[0], rev)
		}
	}
}

// normalizeSpaces collapses runs of blanks, so that expected tables do not
// depend on column widths.
func normalizeSpaces(s string) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(lines, "\n")
}

func TestDiscoveryErrors(t *testing.T) {
	e := startDiscovery(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown output", []string{"pools", "-o", "xml"}, `--output="xml": must be table, wide, json or yaml`},
		{"a certificate without its key", []string{"routers", "--cert-file", "c.crt"}, `--cert-file="c.crt" and --key-file="": give both or neither`},
		{"a pool without its namespace", []string{"pools", "echo"}, `pool "echo": want NAMESPACE/NAME`},
		{"a missing pool", []string{"pools", "demo/nope"}, "404 Not Found"},
		{"a bad selector", []string{"pools", "-l", "tier in web"}, "400 Bad Request: labelSelector="},
		{"a bad region", []string{"pools", "--region", "Not A Region"}, `region="Not A Region"`},
		{"no token", []string{"pools", "--token-file", "/nonexistent/token"}, "--token-file: open /nonexistent/token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.run(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want %q\n%s", err, tt.want, out)
			}
		})
	}
	// Without credentials the server answers 401, which is said as such.
	cmd := ctl.NewRootCommand()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetArgs([]string{"discovery", "pools", "--server", e.URL, "--ca-file", e.flags[3]})
	if err := cmd.ExecuteContext(t.Context()); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("without a token: %v, want 401", err)
	}
}

// watch runs `fleetnetctl discovery watch args...` until stop is called,
// which returns its error.
func (e *discoveryEnv) watch(t *testing.T, args ...string) (*testkit.SyncBuffer, func() error) {
	t.Helper()
	cmd := ctl.NewRootCommand()
	out, errOut := &testkit.SyncBuffer{}, &testkit.SyncBuffer{}
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	cmd.SetArgs(append(append([]string{"discovery", "watch"}, args...), e.flags...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			return fmt.Errorf("the watch did not end; stderr: %s", errOut.String())
		}
	}
	t.Cleanup(func() { _ = stop() })
	return out, stop
}

// waitLines waits until out has n lines and returns them.
func waitLines(t *testing.T, out *testkit.SyncBuffer, n int) []string {
	t.Helper()
	var lines []string
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d lines", n), func(context.Context) error {
		lines = nil
		sc := bufio.NewScanner(strings.NewReader(out.String()))
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		if len(lines) < n {
			return fmt.Errorf("%d lines:\n%s", len(lines), out.String())
		}
		return nil
	})
	return lines
}

func TestDiscoveryWatch(t *testing.T) {
	e := startDiscovery(t)
	e.register(t, "east", "eu-west-1", "echo-0")
	westLease := e.register(t, "west", "us-west-2", "echo-2")
	snapshotRev := e.Store.Revision()

	out, stop := e.watch(t, "-n", "demo")
	lines := waitLines(t, out, 3)
	want := []string{
		"REVISION EVENT NAMESPACE NAME CLUSTERS",
		fmt.Sprintf("%d SNAPSHOT demo echo east(eu-west-1) 1/1, west(us-west-2) 1/1", snapshotRev),
		fmt.Sprintf("%d SYNCED - - -", snapshotRev),
	}
	if diff := cmp.Diff(want, strings.Split(normalizeSpaces(strings.Join(lines, "\n")), "\n")); diff != "" {
		t.Errorf("snapshot (-want +got):\n%s", diff)
	}
	// West leaves: the watch prints the change.
	if err := e.Client(t, discoverytest.RegisterToken, nil).Deregister(t.Context(), westLease); err != nil {
		t.Fatal(err)
	}
	lines = waitLines(t, out, 4)
	if got, want := normalizeSpaces(lines[3]), fmt.Sprintf("%d UPSERT demo echo east(eu-west-1) 1/1", e.Store.Revision()); got != want {
		t.Errorf("after west left: %q, want %q", got, want)
	}
	if err := stop(); err != nil {
		t.Errorf("an interrupted watch ended with %v, want nil", err)
	}

	// -o json: one event per line, from a revision: only what changed
	// after it; --region keeps that region's clusters.
	out, stop = e.watch(t, "-o", "json", "--revision", fmt.Sprint(snapshotRev), "--region", "eu-west-1")
	var ev discoveryv1.Event
	if err := json.Unmarshal([]byte(waitLines(t, out, 1)[0]), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != discoveryv1.EventUpsert || ev.Pool == nil || len(ev.Pool.Clusters) != 1 || ev.Pool.Clusters[0].Cluster != "east" {
		t.Errorf("resumed json watch: %+v", ev)
	}
	if err := stop(); err != nil {
		t.Errorf("json watch: %v", err)
	}
}
