// Command bench loads a registry deployed as in production (a 3-member etcd
// on loopback, two fleetnet-registry replicas) with the fleet load
// generator, and prints what it measured against the goals of issue 17.
// `make bench-scale` runs it; FLEETNET_SCALE=0.1 (or -scale 0.1) runs a
// tenth of the full size (100 clusters, 5,000 services each exported by 3
// clusters with 20 endpoints: 300,000 endpoints; 100 watchers).
//
// Memory and CPU are read from /proc for each process: resident set (and
// its peak, VmHWM) and user plus system time, around the phases.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/fleetnet/fleetnet/internal/registry/load"
	"github.com/fleetnet/fleetnet/test/scale"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
}

func run() error {
	defScale := 1.0
	if v := os.Getenv("FLEETNET_SCALE"); v != "" {
		s, err := strconv.ParseFloat(v, 64)
		if err != nil || s <= 0 || s > 1 {
			return fmt.Errorf("FLEETNET_SCALE=%s: must be a number in (0, 1]", v)
		}
		defScale = s
	}
	sc := flag.Float64("scale", defScale, "fraction of the full size (default from FLEETNET_SCALE, else 1)")
	churn := flag.Float64("churn", 50, "endpoint changes per second during the churn phase")
	duration := flag.Duration("duration", 30*time.Second, "how long endpoints churn")
	idle := flag.Duration("idle", 30*time.Second, "how long only leases are renewed, to measure their cost")
	leaseTTL := flag.Duration("lease-ttl", 30*time.Second, "the registry's --lease-ttl (clusters renew every third of it)")
	noFsync := flag.Bool("no-fsync", false, "run etcd with --unsafe-no-fsync")
	keep := flag.Bool("keep", false, "keep the deployment's directory (logs, data)")
	verbose := flag.Bool("v", false, "log the load generator's phases")
	flag.Parse()
	if *sc <= 0 || *sc > 1 {
		return fmt.Errorf("-scale=%g: must be in (0, 1]", *sc)
	}
	scaled := func(full, least int) int { return max(least, int(math.Round(float64(full)**sc))) }
	cfg := load.Config{
		Clusters: scaled(100, 3), Services: scaled(5000, 1), ExportersPerService: 3, EndpointsPerExport: 20,
		Watchers: scaled(100, 1), Churn: *churn, Duration: *duration, Idle: *idle, Seed: 1,
		PhaseTimeout: 5 * time.Minute,
	}
	if *verbose {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "fleetnet-bench-scale")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Fprintf(os.Stderr, "keeping %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	bin, err := scale.BuildRegistry(dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "starting a 3-member etcd and two registry replicas in %s\n", dir)
	d, err := scale.Start(ctx, scale.Options{Dir: dir, RegistryBinary: bin, LeaseTTL: *leaseTTL, NoFsync: *noFsync})
	if err != nil {
		return err
	}
	defer d.Close()

	m := &meter{d: d, at: map[string]sample{}}
	cfg.OnPhase = m.phase
	go m.sampleRSS(ctx)
	fmt.Fprintf(os.Stderr, "loading: %d clusters, %d services x 3 exporters x 20 endpoints, %d watchers\n", cfg.Clusters, cfg.Services, cfg.Watchers)
	start := time.Now()
	rep, err := load.Run(ctx, cfg, load.Target{Address: d.Address(), CAFile: d.CAFile, CA: d.CA, CertDir: dir + "/load-certs"})
	if rep == nil {
		return err
	}
	rep.Write(os.Stdout)
	fmt.Println()
	m.table(rep, cfg, *leaseTTL, !*noFsync, time.Since(start))
	return err
}

// sample is every process's usage at one moment.
type sample struct {
	at       time.Time
	replicas []scale.Usage
	members  []scale.Usage
	// self is the load generator's own process.
	self scale.Usage
}

type meter struct {
	d  *scale.Deployment
	mu sync.Mutex
	at map[string]sample
	// peak RSS per replica, sampled (VmHWM covers it too).
	peak []int64
}

func (m *meter) take() sample {
	s := sample{at: time.Now()}
	s.self, _ = scale.ProcUsage(os.Getpid())
	for _, r := range m.d.Replicas {
		u, _ := scale.ProcUsage(r.Proc.Pid())
		s.replicas = append(s.replicas, u)
	}
	for _, e := range m.d.Members {
		u, _ := scale.ProcUsage(e.Proc.Pid())
		s.members = append(s.members, u)
	}
	return s
}

func (m *meter) phase(name string) {
	s := m.take()
	m.mu.Lock()
	m.at[name] = s
	m.mu.Unlock()
}

func (m *meter) sampleRSS(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s := m.take()
		m.mu.Lock()
		if m.peak == nil {
			m.peak = make([]int64, len(s.replicas))
		}
		for i, u := range s.replicas {
			m.peak[i] = max(m.peak[i], u.RSS)
		}
		m.mu.Unlock()
	}
}

// cpu is the CPU the replicas (or members) used between two phases' starts,
// as a fraction of one core.
func cpu(from, to sample, members bool) (float64, time.Duration) {
	a, b := from.replicas, to.replicas
	if members {
		a, b = from.members, to.members
	}
	var used time.Duration
	for i := range a {
		used += b[i].CPU - a[i].CPU
	}
	wall := to.at.Sub(from.at)
	if wall <= 0 {
		return 0, 0
	}
	return float64(used) / float64(wall), used
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

func (m *meter) table(rep *load.Report, cfg load.Config, ttl time.Duration, fsync bool, took time.Duration) {
	final := m.take()
	m.mu.Lock()
	defer m.mu.Unlock()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "goal (issue 17)\tmeasured\ttarget\tmet\n")
	snap := rep.Phase("snapshot")
	fmt.Fprintf(w, "full snapshot per watcher, from connecting (%d at once, %d endpoints)\tp50 %s, p99 %s, max %s\t< 10 s\t%s\n",
		cfg.Watchers, rep.Endpoints, snap.Latency.P50.Round(time.Millisecond), snap.Latency.P99.Round(time.Millisecond), snap.Latency.Max.Round(time.Millisecond), yes(snap.Latency.Max < 10*time.Second && snap.Ops == cfg.Watchers))
	all := rep.Fanout.AllWatchers
	fmt.Fprintf(w, "one endpoint change to all %d watchers (%d changes at %.0f/s)\tp50 %s, p99 %s, max %s\tp99 < 100 ms\t%s\n",
		cfg.Watchers, rep.Churn.Changes, rep.Churn.Rate, all.P50.Round(100*time.Microsecond), all.P99.Round(100*time.Microsecond), all.Max.Round(100*time.Microsecond), yes(all.N > 0 && all.P99 < 100*time.Millisecond))
	aa := rep.Fanout.AfterAck
	fmt.Fprintf(w, "  the same, from the write's acknowledgement (the store's commit left out)\tp50 %s, p99 %s, max %s; the writes themselves p99 %s\t(reported)\t\n",
		aa.P50.Round(100*time.Microsecond), aa.P99.Round(100*time.Microsecond), aa.Max.Round(100*time.Microsecond), rep.Phase("churn").Latency.P99.Round(100*time.Microsecond))
	ratio := 0.0
	if rep.ChunkBytes > 0 {
		ratio = rep.Fanout.BytesPerWatcherPerChange / float64(rep.ChunkBytes)
	}
	fmt.Fprintf(w, "bytes per watcher per change\t%.0f B (%.2f x one chunk's event, %d B; full snapshot %s)\tproportional to the chunk\t%s\n",
		rep.Fanout.BytesPerWatcherPerChange, ratio, rep.ChunkBytes, mib(rep.SnapshotBytes), yes(ratio > 0 && ratio < 1.5))
	var peak, rss int64
	for i, u := range final.replicas {
		peak = max(peak, u.PeakRSS)
		if i < len(m.peak) {
			peak = max(peak, m.peak[i])
		}
		rss = max(rss, u.RSS)
	}
	fmt.Fprintf(w, "registry resident memory (largest replica)\tpeak %s, at the end %s\t< 1 GiB\t%s\n", mib(peak), mib(rss), yes(peak < 1<<30))
	idleFrom, ok1 := m.at["idle"]
	idleTo, ok2 := m.at["verify"]
	if ok1 && ok2 {
		frac, used := cpu(idleFrom, idleTo, false)
		efrac, _ := cpu(idleFrom, idleTo, true)
		idle := rep.Phase("idle")
		fmt.Fprintf(w, "lease renewals of %d clusters (every %s; %d in %s): both replicas' CPU\t%.2f%% of one core (%s); etcd's 3 members %.2f%%\t< 5%%\t%s\n",
			cfg.Clusters, ttl/3, idle.Ops, idle.Took, 100*frac, used.Round(time.Millisecond), 100*efrac, yes(frac < 0.05))
	}
	if from, ok := m.at["snapshot"]; ok {
		if to, ok := m.at["churn"]; ok {
			frac, used := cpu(from, to, false)
			efrac, _ := cpu(from, to, true)
			self := to.self.CPU - from.self.CPU
			fmt.Fprintf(w, "CPU during the snapshots (%s in all)\treplicas %.0f%% of one core (%s, %s per watcher), etcd %.0f%%; the load generator %s\t(reported)\t\n",
				mib(rep.SnapshotBytes*int64(cfg.Watchers)), 100*frac, used.Round(10*time.Millisecond), (used / time.Duration(max(1, cfg.Watchers))).Round(time.Millisecond), 100*efrac, self.Round(10*time.Millisecond))
		}
	}
	if from, ok := m.at["churn"]; ok {
		if to, ok := m.at["converge"]; ok {
			frac, _ := cpu(from, to, false)
			efrac, _ := cpu(from, to, true)
			fmt.Fprintf(w, "CPU during the churn (%.0f changes/s)\treplicas %.0f%%, etcd %.0f%% of one core\t(reported)\t\n", rep.Churn.Rate, 100*frac, 100*efrac)
		}
	}
	if from, ok := m.at["export"]; ok {
		if to, ok := m.at["snapshot"]; ok {
			ex := rep.Phase("export")
			frac, _ := cpu(from, to, false)
			efrac, _ := cpu(from, to, true)
			fmt.Fprintf(w, "export of every service (%d writes, etcd fsync %v)\t%s, %.0f writes/s, p99 %s; replicas %.0f%%, etcd %.0f%% of one core\t(reported)\t\n",
				ex.Ops, fsync, ex.Took.Round(time.Millisecond), float64(ex.Ops)/ex.Took.Seconds(), ex.Latency.P99.Round(time.Millisecond), 100*frac, 100*efrac)
		}
	}
	fmt.Fprintf(w, "acknowledged writes lost; lease lapses; snapshots after the first\t%d; %d; %d\t0; 0; 0\t%s\n", rep.Lost, rep.Leases.Lapses, rep.ExtraSnapshots,
		yes(rep.Lost == 0 && rep.Leases.Lapses == 0 && rep.ExtraSnapshots == 0))
	fmt.Fprintf(w, "whole run\t%s\t\t\n", took.Round(time.Second))
	w.Flush()
}
