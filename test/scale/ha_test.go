package scale_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/ctl"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/fleetnet/fleetnet/internal/registry/load"
	"github.com/fleetnet/fleetnet/test/fleet"
	"github.com/fleetnet/fleetnet/test/scale"
	"google.golang.org/protobuf/proto"
)

var registryBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fleetnet-scale-bin")
	if err != nil {
		panic(err)
	}
	registryBinary, err = scale.BuildRegistry(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// deploy starts a 3-member etcd and two registry replicas for the test.
func deploy(t *testing.T, leaseTTL time.Duration) *scale.Deployment {
	t.Helper()
	d, err := scale.Start(context.Background(), scale.Options{Dir: t.TempDir(), RegistryBinary: registryBinary, LeaseTTL: leaseTTL, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// reduced is the load the fault tests run under: a small fleet, endpoints
// changing throughout.
func reduced(seed uint64) load.Config {
	return load.Config{
		Clusters: 10, Services: 100, ExportersPerService: 2, EndpointsPerExport: 20,
		Watchers: 6, Churn: 40, Duration: 6 * time.Second, Writers: 16, Seed: seed,
		PhaseTimeout: time.Minute,
	}
}

// faultDuringChurn calls fault once, in its own goroutine, after the
// fiftieth acknowledged churn write, and records what followed: writes
// acknowledged and failed after it, and the first acknowledgement after it.
type faultDuringChurn struct {
	fault func() error

	acked      atomic.Int64
	mu         sync.Mutex
	faultAt    time.Time
	faultErr   error
	done       chan struct{}
	okAfter    int
	failAfter  int
	resumedGap time.Duration
}

func (f *faultDuringChurn) onWrite(at time.Time, err error) {
	if err == nil && f.acked.Add(1) == 50 {
		go func() {
			f.mu.Lock()
			f.faultAt = time.Now()
			f.mu.Unlock()
			ferr := f.fault()
			f.mu.Lock()
			f.faultErr = ferr
			f.mu.Unlock()
			close(f.done)
		}()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.faultAt.IsZero() || at.Before(f.faultAt) {
		return
	}
	if err != nil {
		f.failAfter++
		return
	}
	if f.okAfter == 0 {
		f.resumedGap = at.Sub(f.faultAt)
	}
	f.okAfter++
}

func (f *faultDuringChurn) check(t *testing.T) {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(time.Minute):
		t.Fatal("the fault was never injected (fewer than 50 writes acknowledged?)")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.faultErr != nil {
		t.Fatalf("injecting the fault: %v", f.faultErr)
	}
	if f.okAfter == 0 {
		t.Fatalf("no write was acknowledged after the fault (%d failed)", f.failAfter)
	}
	t.Logf("after the fault: first write acknowledged after %s; %d acknowledged, %d failed", f.resumedGap.Round(time.Millisecond), f.okAfter, f.failAfter)
}

func runLoad(t *testing.T, d *scale.Deployment, cfg load.Config) *load.Report {
	t.Helper()
	rep, err := load.Run(context.Background(), cfg, load.Target{Address: d.Address(), CAFile: d.CAFile, CA: d.CA, CertDir: t.TempDir()})
	if rep != nil {
		var out bytes.Buffer
		rep.Write(&out)
		t.Logf("load report:\n%s", out.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestEtcdLeaderKilledDuringWrites kills the etcd leader with SIGKILL while
// endpoints churn: writes resume after the election, no acknowledged write
// is lost (the load generator reads every chunk back, and every watcher
// holds every acknowledged version), and watchers keep or resume their
// stream without a new snapshot.
func TestEtcdLeaderKilledDuringWrites(t *testing.T) {
	d := deploy(t, 10*time.Second)
	var killed *scale.Member
	f := &faultDuringChurn{done: make(chan struct{}), fault: func() error {
		leader, err := d.Leader(context.Background())
		if err != nil {
			return err
		}
		killed = leader
		leader.Proc.Kill()
		return nil
	}}
	cfg := reduced(1)
	cfg.OnWrite = f.onWrite
	rep := runLoad(t, d, cfg)
	f.check(t)
	if rep.ExtraSnapshots != 0 {
		t.Errorf("watchers received %d snapshots after their first: they could not resume from their revision", rep.ExtraSnapshots)
	}
	if rep.Leases.Lapses != 0 {
		t.Errorf("%d leases lapsed", rep.Leases.Lapses)
	}
	leader, err := d.Leader(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if leader == killed {
		t.Fatalf("the killed member %s still leads", killed.Name)
	}
	t.Logf("killed leader %s; %s leads now; %d watch resumes, %d churn writes failed", killed.Name, leader.Name, rep.Resumes, rep.Churn.Failed)
}

// TestRegistryReplicaKilled kills one of the two registry replicas with
// SIGKILL while endpoints churn: the clients, given both addresses, go on
// with the other; with a 3 s lease TTL (renewed every second) a failover
// slower than about two seconds would let leases lapse; watchers resume
// from their revision on the other replica without a snapshot and end up
// holding every import and every acknowledged write.
func TestRegistryReplicaKilled(t *testing.T) {
	d := deploy(t, 3*time.Second)
	killed := -1
	f := &faultDuringChurn{done: make(chan struct{}), fault: func() error {
		// The replica that holds the most watch streams: the client
		// balances calls over both, so which one has them is chance.
		most := -1.0
		for i, r := range d.Replicas {
			n, err := watchers(r)
			if err != nil {
				return err
			}
			if n > most {
				killed, most = i, n
			}
		}
		d.Replicas[killed].Proc.Kill()
		return nil
	}}
	cfg := reduced(2)
	cfg.OnWrite = f.onWrite
	rep := runLoad(t, d, cfg)
	f.check(t)
	if rep.Leases.Lapses != 0 {
		t.Errorf("%d leases lapsed while one replica was killed", rep.Leases.Lapses)
	}
	if rep.ExtraSnapshots != 0 {
		t.Errorf("watchers received %d snapshots after their first: they could not resume on the other replica", rep.ExtraSnapshots)
	}
	if rep.Resumes == 0 {
		t.Error("no watch resumed: were the watchers on the killed replica at all?")
	}
	t.Logf("replica %d killed: %d watch resumes; lease renewals p99 %s, max %s; slowest churn write %s",
		killed, rep.Resumes, rep.Leases.Latency.P99, rep.Leases.Latency.Max, rep.Phase("churn").Latency.Max)
}

// snapshot reads a replica's full view through a watch: imports, chunks and
// every export's status, up to the synced mark.
func snapshot(t *testing.T, o client.Options, resume int64) []*registryv1.WatchEvent {
	t.Helper()
	c, conn, err := client.Dial(o)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.Watch(ctx, &registryv1.WatchRequest{ExportStatusClusterId: "*", ResumeRevision: resume}, client.WaitForConnection())
	if err != nil {
		t.Fatal(err)
	}
	var out []*registryv1.WatchEvent
	for {
		e, err := s.Recv()
		if err != nil {
			t.Fatalf("watching %s: %v", o.Address, err)
		}
		out = append(out, e)
		if e.GetSynced() != nil {
			return out
		}
	}
}

// TestRestartEverything fills the registry with `fleetnetctl registry load
// --keep` through both replicas, kills every etcd member and replica, starts
// them again, and finds the same view on both replicas: the same snapshot,
// event for event, at the same revision; a watcher resuming from that
// revision needs no snapshot.
func TestRestartEverything(t *testing.T) {
	d := deploy(t, time.Minute)
	var out bytes.Buffer
	cmd := ctl.NewRootCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"registry", "load", "--registry", d.Address(), "--ca-file", d.CAFile,
		"--ca-key-file", filepath.Join(d.CertDir, "ca.key"), "--cert-dir", t.TempDir(),
		"--clusters", "6", "--services", "60", "--exporters", "3", "--endpoints", "30", "--endpoints-per-chunk", "20",
		"--watchers", "3", "--churn", "20", "--duration", "2s", "--keep"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("fleetnetctl registry load: %v\n%s", err, out.String())
	}
	t.Logf("fleetnetctl registry load:\n%s", out.String())
	if !strings.Contains(out.String(), "acknowledged writes lost: 0;") {
		t.Fatalf("the load report does not say no write was lost")
	}

	before := snapshot(t, d.ReplicaOptions(0), 0)
	imports := 0
	for _, e := range before {
		if e.GetImportUpsert() != nil {
			imports++
		}
	}
	if imports != 60 {
		t.Fatalf("the snapshot before the restart holds %d imports, want 60", imports)
	}
	d.KillAll()
	if err := d.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range d.Replicas {
		after := snapshot(t, d.ReplicaOptions(i), 0)
		if len(after) != len(before) {
			t.Fatalf("replica %d after the restart: %d snapshot events, %d before", i, len(after), len(before))
		}
		for j := range before {
			if !proto.Equal(before[j], after[j]) {
				t.Fatalf("replica %d after the restart: snapshot event %d differs:\nbefore %v\nafter  %v", i, j, before[j], after[j])
			}
		}
		resumed := snapshot(t, d.ReplicaOptions(i), before[0].GetRevision())
		if len(resumed) != 1 || resumed[0].GetSynced() == nil {
			t.Fatalf("replica %d: resuming from revision %d sent %d events, want only the synced mark", i, before[0].GetRevision(), len(resumed))
		}
	}
	t.Logf("both replicas rebuilt the same view: %d snapshot events at revision %d", len(before), before[0].GetRevision())
}

// watchers reads a replica's fleetnet_registry_watchers gauge.
func watchers(r *scale.Replica) (float64, error) {
	families, err := fleet.ScrapeMetrics(context.Background(), "http://"+r.MetricsAddr+"/metrics")
	if err != nil {
		return 0, err
	}
	if families["fleetnet_registry_watchers"] == nil {
		return 0, fmt.Errorf("replica %s: no fleetnet_registry_watchers in its metrics", r.Addr)
	}
	return fleet.Sum(families, "fleetnet_registry_watchers", nil), nil
}
