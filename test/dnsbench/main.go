// Command dnsbench measures fleetnet-dns beside CoreDNS's own kubernetes
// plugin in one run (issue 15, "Benchmarks"): one real kube-apiserver holds
// N Services, each with an EndpointSlice, and N ServiceImports with the
// Services' ClusterIPs as ClusterSetIPs, each with an imported
// EndpointSlice. fleetnet-dns answers <svc>.<ns>.svc.clusterset.local, the
// kubernetes plugin <svc>.<ns>.svc.cluster.local, each in a process of its
// own, and a load generator in this process asks A questions for random
// names over UDP on loopback: queries per second, latency percentiles, the
// server's CPU time per query and resident memory of each server, with CoreDNS's cache in front (as
// deployed) and without it (the plugin alone).
//
//	flock -o /tmp/fleetnet-fleet.lock go run ./test/dnsbench -duration 10s
//
// Both servers run the same executable (this one, re-executed with a
// Corefile): fleetnet-dns' own app (internal/dns/app) with its own plugins
// and the kubernetes plugin linked in, so the binary, the Go runtime and
// every plugin but the answering one are the same. The API server comes
// from bin/ (`make tools`).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"text/tabwriter"
	"time"
)

func main() {
	if path := os.Getenv(corefileEnv); path != "" {
		if err := serve(path); err != nil {
			fmt.Fprintln(os.Stderr, "dnsbench server:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.IntVar(&o.services, "services", 1000, "Services and ServiceImports (each with one EndpointSlice of 3 endpoints)")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured load per server and configuration")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured load before each measurement; 0 for none")
	flag.IntVar(&o.concurrency, "concurrency", 16, "queries in flight (one UDP socket each, closed loop)")
	flag.DurationVar(&o.ttl, "ttl", 5*time.Second, "TTL of both servers' records, and their cache's cap")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dnsbench:", err)
		os.Exit(1)
	}
}

type options struct {
	services    int
	duration    time.Duration
	warmup      time.Duration
	concurrency int
	ttl         time.Duration
}

// config is one server in one configuration.
type config struct {
	name  string
	zone  string // "clusterset.local" or "cluster.local"
	cache bool
}

// outcome is what was measured of one config.
type outcome struct {
	ready         time.Duration // from start to /ready
	load          loadResult
	cpu           time.Duration // the server's CPU time during the load
	rssIdle       int64         // kB, after the caches synced and every name was asked once
	rssAfter, hwm int64         // kB, after the load; peak
}

func run(ctx context.Context, o options, out io.Writer) error {
	if o.services < 1 || o.concurrency < 1 || o.duration < time.Second || o.ttl < time.Second || o.ttl%time.Second != 0 {
		return errors.New("need -services and -concurrency of at least 1, -duration of at least 1s and -ttl of whole seconds, at least 1s")
	}
	dir, err := os.MkdirTemp("", "dnsbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	start := time.Now()
	cl, err := startCluster(ctx, dir)
	if err != nil {
		return err
	}
	defer cl.stop()
	fmt.Fprintf(out, "dnsbench: kube-apiserver ready in %s\n", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	svcs, err := populate(ctx, cl.config, o.services)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "dnsbench: %d Services and %d ServiceImports (each with an EndpointSlice of 3 endpoints) created in %s\n",
		o.services, o.services, time.Since(start).Round(time.Millisecond))

	configs := []config{
		{name: "fleetnet-dns", zone: "clusterset.local", cache: true},
		{name: "CoreDNS kubernetes", zone: "cluster.local", cache: true},
		{name: "fleetnet-dns", zone: "clusterset.local", cache: false},
		{name: "CoreDNS kubernetes", zone: "cluster.local", cache: false},
	}
	fmt.Fprintf(out, "dnsbench: %d CPUs, %s, %d UDP sockets in a closed loop, %s per configuration after %s of warm-up, TTL %s\n",
		runtime.NumCPU(), runtime.Version(), o.concurrency, o.duration, o.warmup, o.ttl)
	results := make([]outcome, len(configs))
	for i, c := range configs {
		r, err := measure(ctx, dir, cl.kubeconfig, c, svcs, o)
		if err != nil {
			return fmt.Errorf("%s (%s, cache %v): %w", c.name, c.zone, c.cache, err)
		}
		results[i] = r
		fmt.Fprintf(out, "  %-18s cache=%-5v done: %.0f queries/s\n", c.name, c.cache, r.load.qps())
	}
	printTable(out, configs, results)
	return nil
}

func printTable(out io.Writer, configs []config, results []outcome) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "server\tzone\tcache\tqueries/s\tp50\tp99\tp99.9\tCPU/query\terrors\ttimeouts\tready after\tRSS idle\tRSS after load\tpeak RSS\t")
	for i, c := range configs {
		r := results[i]
		cache := "none"
		if c.cache {
			cache = "yes"
		}
		perQuery := "-"
		if r.load.queries > 0 {
			perQuery = fmt.Sprintf("%.1fµs", float64(r.cpu.Microseconds())/float64(r.load.queries))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t\n", c.name, c.zone, cache, r.load.qps(),
			us(r.load.hist.percentile(0.50)), us(r.load.hist.percentile(0.99)), us(r.load.hist.percentile(0.999)), perQuery,
			r.load.errors, r.load.timeouts, r.ready.Round(time.Millisecond), mib(r.rssIdle), mib(r.rssAfter), mib(r.hwm))
	}
	tw.Flush()
}

func us(d time.Duration) string { return fmt.Sprintf("%dµs", d.Microseconds()) }

func mib(kb int64) string { return fmt.Sprintf("%.1f MiB", float64(kb)/1024) }
