// Command l4bench measures fleetnet-edge's L4 data plane beside haproxy in
// TCP mode in one run (issue 13, "Benchmarks"): both balance the same
// loopback backends; a few long connections measure throughput (MB/s
// the backends stream to the clients), short connections (connect, one
// 64-byte exchange, close) the connection rate, and UDP clients (one
// 64-byte datagram in flight each) the datagrams per second through the
// edge (haproxy does not proxy UDP). The backends without a proxy are the
// baseline.
//
//	go run ./test/l4bench -duration 5s
//
// The backends and each load generator run in child processes; the edge
// runs in this one, so a -cpuprofile holds the edge's work only. It needs
// haproxy from Debian: apt-get install haproxy.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	edgeapp "github.com/fleetnet/fleetnet/internal/edge/app"
	"github.com/fleetnet/fleetnet/internal/edge/l4"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

func main() {
	switch os.Getenv(roleEnv) {
	case "backends":
		n, err := strconv.Atoi(os.Getenv(argEnv))
		if err == nil {
			err = serveBackends(n)
		}
		exitOn("l4bench backends", err)
		return
	case "load":
		exitOn("l4bench load", generate(os.Getenv(argEnv)))
		return
	}
	var o options
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "measured time of each load")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured time before each load")
	flag.IntVar(&o.streams, "streams", 4, "long connections of the throughput load")
	flag.IntVar(&o.exchangers, "exchangers", 32, "long connections of the east-west latency loads (64-byte exchanges): saturated on the haproxy pair, then at half that rate on every target")
	flag.IntVar(&o.connectors, "connectors", 32, "clients of the connection-rate load, each opening one connection after the other")
	flag.IntVar(&o.udpClients, "udp-clients", 32, "UDP client sockets (flows), each with one datagram in flight")
	flag.IntVar(&o.backends, "backends", 4, "backends behind both proxies")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds over every target and load, interleaved so that a noisy neighbour hits all alike; the table shows medians")
	flag.IntVar(&o.threads, "haproxy-threads", 0, "haproxy's nbthread; 0 leaves haproxy's default (one per CPU)")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of this process (the edge) over the whole run to `file`")
	flag.BoolVar(&o.eastwest, "eastwest", false, "compare east-west gateways instead (make bench-eastwest): a connection through fleetnet's pair (the edge's L4 proxy and a peer's tunnel.Server, HTTP/2 CONNECT over mutual TLS 1.3) beside a pair of haproxy frontends doing the same over TLS 1.3, and the direct path; TCP loads only")
	flag.StringVar(&o.loads, "loads", strings.Join(allLoads, ","), "the loads to run, of "+strings.Join(allLoads, ", ")+" (one alone, to profile it with -cpuprofile)")
	flag.Parse()
	exitOn("l4bench", run(o, os.Stdout))
}

func exitOn(what string, err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, what+":", err)
		os.Exit(1)
	}
}

type options struct {
	duration, warmup                time.Duration
	streams, connectors, udpClients int
	// exchangers are the long connections of the east-west latency loads.
	exchangers                int
	backends, threads, rounds int
	cpuprofile                string
	eastwest                  bool
	// loads are the loads to run, comma-separated.
	loads string
}

// allLoads are the loads, in the order they run.
var allLoads = []string{loadStream, loadConnect, loadUDP}

// target is one address the loads run against.
type target struct {
	name, tcp, udp string
}

func run(o options, out io.Writer) error {
	if o.backends < 1 || o.streams < 1 || o.connectors < 1 || o.udpClients < 1 || o.rounds < 1 || o.duration < 100*time.Millisecond {
		return errors.New("need -backends, -streams, -connectors, -udp-clients and -rounds of at least 1 and -duration of at least 100ms")
	}
	selected := map[string]bool{}
	for _, l := range strings.Split(o.loads, ",") {
		if !slices.Contains(allLoads, l) {
			return fmt.Errorf("-loads=%q: %q is none of %s", o.loads, l, strings.Join(allLoads, ", "))
		}
		selected[l] = true
	}
	haproxyBin, err := haproxyPath()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "l4bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	be, err := startBackends(o.backends)
	if err != nil {
		return err
	}
	defer be.stop()

	var targets []target
	if o.eastwest {
		delete(selected, loadUDP) // streams carry TCP only
		ew, err := startEastWest(haproxyBin, dir, o.threads, be.tcp)
		if err != nil {
			return err
		}
		defer ew.stop()
		targets = []target{
			{name: "direct (backend 1)", tcp: be.tcp[0]},
			{name: "fleetnet east-west", tcp: ew.fleetnet},
			{name: "haproxy pair", tcp: ew.haproxyAddr},
		}
	} else {
		ports, err := testkit.PickFreePorts(3)
		if err != nil {
			return err
		}
		edgeTCP, edgeUDP, haproxyPort := ports[0], ports[1], ports[2]
		// The same garbage collection setting as the fleetnet-edge binary.
		edgeapp.TuneGC()
		edge := l4.New(l4.Options{
			ListenHost: "127.0.0.1",
			Log:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		if err := edge.Apply(benchModel(be.tcp, be.udp, edgeTCP, edgeUDP)); err != nil {
			return fmt.Errorf("applying the edge's model: %w", err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = edge.Close(ctx)
		}()
		hp, err := startHAProxy(haproxyBin, dir, addr(haproxyPort), o.threads, be.tcp)
		if err != nil {
			return err
		}
		defer hp.stop()
		targets = []target{
			{name: "direct (backend 1)", tcp: be.tcp[0], udp: be.udp[0]},
			{name: "fleetnet-edge", tcp: addr(edgeTCP), udp: addr(edgeUDP)},
			{name: "haproxy", tcp: addr(haproxyPort)},
		}
	}

	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	threads := "default"
	if o.threads > 0 {
		threads = strconv.Itoa(o.threads)
	}
	fmt.Fprintf(out, "l4bench: %d CPUs, %s, haproxy %s (nbthread %s), %d backends; %d rounds, per load %s after %s of warm-up: %d streams, %d connectors, %d UDP clients\n",
		runtime.NumCPU(), runtime.Version(), haproxyVersion(haproxyBin), threads, o.backends, o.rounds, o.duration, o.warmup, o.streams, o.connectors, o.udpClients)
	// runs[target][mode] are the rounds' results.
	runs := map[string]map[string][]result{}
	for round := range o.rounds {
		for _, t := range targets {
			if runs[t.name] == nil {
				runs[t.name] = map[string][]result{}
			}
			loads := []struct {
				mode, addr string
				conns      int
			}{
				{loadStream, t.tcp, o.streams},
				{loadConnect, t.tcp, o.connectors},
				{loadUDP, t.udp, o.udpClients},
			}
			for _, l := range loads {
				if l.addr == "" || !selected[l.mode] {
					continue
				}
				res, err := runLoad(load{Mode: l.mode, Addr: l.addr, Conns: l.conns, Warmup: o.warmup, Duration: o.duration})
				if err != nil {
					return err
				}
				runs[t.name][l.mode] = append(runs[t.name][l.mode], res)
			}
			fmt.Fprintf(out, "  round %d: %-20s MB/s %.0f, conn/s %.0f\n", round+1, t.name,
				perSecond(last(runs[t.name][loadStream]), bytesOf)/1e6, perSecond(last(runs[t.name][loadConnect]), opsOf))
		}
	}
	type row struct{ stream, connect, udp *result }
	rows := map[string]*row{}
	for _, t := range targets {
		rows[t.name] = &row{
			stream:  median(runs[t.name][loadStream], bytesOf),
			connect: median(runs[t.name][loadConnect], opsOf),
			udp:     median(runs[t.name][loadUDP], opsOf),
		}
	}

	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "target\tTCP MB/s\terrors\tTCP conn/s\terrors\tUDP datagrams/s\tlost\t")
	for _, t := range targets {
		r := rows[t.name]
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", t.name,
			rate(r.stream, func(x *result) float64 { return float64(x.Bytes) / 1e6 }), errs(r.stream),
			rate(r.connect, func(x *result) float64 { return float64(x.Ops) }), errs(r.connect),
			rate(r.udp, func(x *result) float64 { return float64(x.Ops) }), errs(r.udp))
	}
	_ = w.Flush()
	ratio := func(e, h *result, f func(*result) float64) string {
		if e == nil || h == nil {
			return "-"
		}
		return strconv.FormatFloat(perSecond(e, f)/perSecond(h, f), 'f', 2, 64)
	}
	if o.eastwest {
		e, h, d := rows["fleetnet east-west"], rows["haproxy pair"], rows["direct (backend 1)"]
		fmt.Fprintf(out, "\nMB are 10^6 bytes. The direct path is one backend without any proxy; the pairs balance over all of them.\n")
		added, err := eastWestLatency(o, targets, out)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "eastwest: vs-haproxy throughput=%s conns=%s vs-direct=%s added-p99-at-50%%=%.2fms\n",
			ratio(e.stream, h.stream, bytesOf), ratio(e.connect, h.connect, opsOf), ratio(e.stream, d.stream, bytesOf), added)
		return nil
	}
	e, h := rows["fleetnet-edge"], rows["haproxy"]
	fmt.Fprintf(out, "\nedge/haproxy (medians): throughput %s, connection rate %s. MB are 10^6 bytes; UDP datagrams/s are round trips answered (haproxy does not proxy UDP).\n",
		ratio(e.stream, h.stream, bytesOf), ratio(e.connect, h.connect, opsOf))
	return nil
}

// median returns the result of the median rate by f (the lower middle
// one of an even count); nil for none.
func median(rs []result, f func(*result) float64) *result {
	if len(rs) == 0 {
		return nil
	}
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b result) int { return cmp.Compare(perSecond(&a, f), perSecond(&b, f)) })
	return &sorted[(len(sorted)-1)/2]
}

func last(rs []result) *result {
	if len(rs) == 0 {
		return nil
	}
	return &rs[len(rs)-1]
}

func bytesOf(r *result) float64 { return float64(r.Bytes) }
func opsOf(r *result) float64   { return float64(r.Ops) }

func perSecond(r *result, f func(*result) float64) float64 {
	if r == nil || r.Seconds == 0 {
		return 0
	}
	return f(r) / r.Seconds
}

func rate(r *result, f func(*result) float64) string {
	if r == nil {
		return "-"
	}
	return strconv.FormatFloat(f(r)/r.Seconds, 'f', 0, 64)
}

func errs(r *result) string {
	if r == nil {
		return "-"
	}
	return strconv.FormatInt(r.Errors, 10)
}

// benchModel is one load balancer with a TCP and a UDP port whose
// endpoints are the backends, in one cluster.
func benchModel(tcp, udp []string, tcpPort, udpPort int) *edgev1.Model {
	endpoints := func(addrs []string) []edgev1.Endpoint {
		var eps []edgev1.Endpoint
		for _, a := range addrs {
			host, p, _ := net.SplitHostPort(a)
			port, _ := strconv.Atoi(p)
			eps = append(eps, edgev1.Endpoint{Address: host, Port: int32(port), Ready: true, Serving: true})
		}
		return eps
	}
	clusters := func(eps []edgev1.Endpoint) []edgev1.ClusterEndpoints {
		return []edgev1.ClusterEndpoints{{Cluster: "local", Weight: 1, EffectiveWeight: int64(len(eps)), Endpoints: eps}}
	}
	return &edgev1.Model{Version: "l4bench", LoadBalancers: []edgev1.LoadBalancer{{
		Namespace: "bench", Name: "echo", Generation: 1, Class: l4.ClassEdge,
		Ports: []edgev1.LoadBalancerPort{
			{Port: int32(tcpPort), Protocol: edgev1.ProtocolTCP, TargetPort: 7000, Clusters: clusters(endpoints(tcp))},
			{Port: int32(udpPort), Protocol: edgev1.ProtocolUDP, TargetPort: 7000, Clusters: clusters(endpoints(udp))},
		},
		HealthCheck:          edgev1.DefaultBackendPolicy().HealthCheck,
		ConnectTimeoutMillis: 1000, TCPIdleMillis: edgev1.DefaultTCPIdleMillis, UDPIdleMillis: edgev1.DefaultUDPIdleMillis, DrainMillis: edgev1.DefaultDrainMillis,
	}}}
}

func addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// eastWestLatency measures the haproxy pair's saturated rate of 64-byte
// exchanges, then each target's latency at half that rate (open loop),
// medians of the rounds; it returns the p99 fleetnet's pair adds to the
// direct path's.
func eastWestLatency(o options, targets []target, out io.Writer) (float64, error) {
	var saturated []result
	p99 := map[string][]float64{}
	p50 := map[string][]float64{}
	var rate float64
	for range o.rounds {
		r, err := runLoad(load{Mode: loadPingPong, Addr: targets[2].tcp, Conns: o.exchangers, Warmup: o.warmup, Duration: o.duration})
		if err != nil {
			return 0, err
		}
		saturated = append(saturated, r)
		rate = perSecond(&r, opsOf) / 2
		for _, t := range targets {
			res, err := runLoad(load{Mode: loadLatency, Addr: t.tcp, Conns: o.exchangers, Warmup: o.warmup, Duration: o.duration, Rate: rate})
			if err != nil {
				return 0, err
			}
			if res.Errors > 0 {
				return 0, fmt.Errorf("latency load on %s: %d errors", t.name, res.Errors)
			}
			p99[t.name] = append(p99[t.name], res.P99)
			p50[t.name] = append(p50[t.name], res.P50)
		}
	}
	med := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[(len(s)-1)/2]
	}
	sat := perSecond(median(saturated, opsOf), opsOf)
	fmt.Fprintf(out, "\nLatency of 64-byte exchanges on %d connections at half the haproxy pair's saturated rate (%.0f of %.0f/s), open loop, medians of %d rounds:\n",
		o.exchangers, sat/2, sat, o.rounds)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "target\tp50 ms\tp99 ms\tadded p99 ms\t")
	direct := med(p99[targets[0].name])
	for _, t := range targets {
		fmt.Fprintf(w, "%s\t%.3f\t%.3f\t%.3f\t\n", t.name, med(p50[t.name]), med(p99[t.name]), med(p99[t.name])-direct)
	}
	_ = w.Flush()
	return med(p99[targets[1].name]) - direct, nil
}
