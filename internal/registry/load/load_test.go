package load_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/registry/load"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/registry/store"
	"github.com/fleetnet/fleetnet/internal/testkit"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// startRegistry serves a registry over mTLS on loopback, on a real etcd
// started from bin/etcd, and returns its address, the CA bundle and the CA.
func startRegistry(t *testing.T) (string, string, *pki.KeyPair) {
	t.Helper()
	bins, err := controlplane.FindBinaries()
	if err != nil {
		t.Fatalf("%v (run `make tools` to build bin/etcd)", err)
	}
	ports := testkit.FreePorts(t, 2)
	etcd, err := controlplane.StartEtcd(context.Background(), bins, controlplane.EtcdConfig{Dir: t.TempDir(), ClientPort: ports[0], PeerPort: ports[1]}, controlplane.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { etcd.Stop(5 * time.Second) })
	ec, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st := store.NewEtcd(ec, "/load-test/")
	t.Cleanup(func() { st.Close() })
	r := registrytest.StartOnStore(t, st, server.Config{LeaseTTL: 3 * time.Second})
	return r.Addr, filepath.Join(r.CertDir, "ca.crt"), r.CA()
}

func TestRunSmallFleet(t *testing.T) {
	addr, caFile, ca := startRegistry(t)
	var phases []string
	cfg := load.Config{
		Clusters: 5, Services: 40, ExportersPerService: 2, EndpointsPerExport: 30, EndpointsPerChunk: 20,
		Churn: 50, Watchers: 4, Duration: 2 * time.Second, Idle: 500 * time.Millisecond,
		Writers: 8, Seed: 1, Cleanup: true, PhaseTimeout: 30 * time.Second,
		OnPhase: func(p string) { phases = append(phases, p) },
	}
	start := time.Now()
	rep, err := load.Run(context.Background(), cfg, load.Target{Address: addr, CAFile: caFile, CA: ca, CertDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	var out bytes.Buffer
	rep.Write(&out)
	t.Logf("took %s\n%s", took, out.String())

	if got, want := strings.Join(phases, ","), "connect,register,export,snapshot,churn,converge,idle,verify,cleanup,done"; got != want {
		t.Errorf("phases %s, want %s", got, want)
	}
	if rep.Endpoints != 40*2*30 {
		t.Errorf("endpoints %d, want %d", rep.Endpoints, 40*2*30)
	}
	if p := rep.Phase("export"); p.Ops != 40*2*(1+2) || p.Errors != 0 {
		t.Errorf("export phase: %d calls, %d errors; want %d calls, none failed", p.Ops, p.Errors, 40*2*3)
	}
	if rep.Churn.Changes != 100 || rep.Churn.Failed != 0 {
		t.Errorf("churn: %d changes, %d failed; want 100, none failed", rep.Churn.Changes, rep.Churn.Failed)
	}
	if rep.Fanout.Complete != rep.Churn.Changes || rep.Fanout.Deliveries < 4*rep.Churn.Changes {
		t.Errorf("fan-out: %d changes reached every watcher, %d deliveries; want all %d, at least %d", rep.Fanout.Complete, rep.Fanout.Deliveries, rep.Churn.Changes, 4*rep.Churn.Changes)
	}
	if rep.Lost != 0 || rep.ExtraSnapshots != 0 || rep.Leases.Lapses != 0 {
		t.Errorf("lost %d, extra snapshots %d, lapses %d; want none", rep.Lost, rep.ExtraSnapshots, rep.Leases.Lapses)
	}
	if rep.Leases.Renewals == 0 {
		t.Error("no lease was renewed")
	}
	if rep.SnapshotBytes == 0 || rep.ChunkBytes == 0 || rep.Fanout.BytesPerWatcherPerChange == 0 {
		t.Errorf("sizes not measured: snapshot %d, chunk %d, per change %f", rep.SnapshotBytes, rep.ChunkBytes, rep.Fanout.BytesPerWatcherPerChange)
	}
}

func TestConfigAndTargetAreBounded(t *testing.T) {
	ok := load.Config{Clusters: 10, Services: 10, ExportersPerService: 2, EndpointsPerExport: 10, Duration: time.Second}
	for _, tc := range []struct {
		name    string
		edit    func(*load.Config)
		address string
		want    string
	}{
		{"too many clusters", func(c *load.Config) { c.Clusters = load.MaxClusters + 1 }, "127.0.0.1:1", "clusters=1001"},
		{"more exporters than clusters", func(c *load.Config) { c.ExportersPerService = 11 }, "127.0.0.1:1", "exporters per service=11"},
		{"too many endpoints", func(c *load.Config) { c.Services, c.EndpointsPerExport = 100000, 10 }, "127.0.0.1:1", "2000000 endpoints"},
		{"too long", func(c *load.Config) { c.Duration = time.Hour }, "127.0.0.1:1", "duration=1h0m0s"},
		{"churn too fast", func(c *load.Config) { c.Churn = 1e6 }, "127.0.0.1:1", "churn=1e+06/s"},
		{"not loopback", func(*load.Config) {}, "10.0.0.1:7443", "only to loopback"},
		{"one of several not loopback", func(*load.Config) {}, "127.0.0.1:7443,registry.example.com:7443", "registry.example.com:7443"},
		{"no port", func(*load.Config) {}, "127.0.0.1", "missing port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.edit(&cfg)
			ca, err := pki.NewCA("x")
			if err != nil {
				t.Fatal(err)
			}
			_, err = load.Run(context.Background(), cfg, load.Target{Address: tc.address, CA: ca, CertDir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
