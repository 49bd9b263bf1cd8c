// Command edgebench measures fleetnet-edge's data plane beside nginx
// (issue 11, "Benchmarks"; the method of issue 26, item 5): both proxy
// the same echo backends on loopback, with nginx's worker_processes equal
// to the edge's GOMAXPROCS, HTTP/1.1 keep-alive to the backends on both,
// the same TLS 1.3 cipher on both, access logs off and then on for both.
// Each round measures every target once, in the same order:
//
//   - saturated throughput with wrk (HTTP/1.1, plain and TLS) and h2load
//     (HTTP/2 over TLS);
//   - open-loop latency at 25, 50 and 75 % of the round's nginx plain
//     saturated rate, from a fixed-rate generator that times each request
//     from its scheduled send, and the latency each proxy adds over the
//     direct backend at the same rate;
//   - each proxy's CPU per request: nginx's workers from /proc, the edge's
//     from this process's rusage.
//
// The tables are medians of the rounds, and the last line reads
//
//	edge/nginx: plain=<ratio> tls=<ratio> h2=<ratio> added-p99-at-50%=<ms>ms
//
// (saturated req/s edge over nginx, access logs off; the edge's p99 at 50 %
// minus the direct backend's, plain, logs off).
//
//	go run ./test/edgebench -rounds 3
//
// The backends and the open-loop generator run in child processes of this
// program, and wrk and h2load are processes of their own, so the edge is
// the only load in this one: its rusage and a -cpuprofile hold the edge's
// work only. It needs nginx, wrk and h2load from Debian:
// apt-get install nginx-light wrk nghttp2-client (hack/install-deps.sh bench).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/accesslog"
	edgeapp "github.com/fleetnet/fleetnet/internal/edge/app"
	"github.com/fleetnet/fleetnet/internal/edge/proxy"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

func main() {
	if n := os.Getenv(backendEnv); n != "" {
		count, err := strconv.Atoi(n)
		if err == nil {
			err = serveBackends(count)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "edgebench backends:", err)
			os.Exit(1)
		}
		return
	}
	if arg := os.Getenv(openLoopEnv); arg != "" {
		if err := serveOpenLoop(arg); err != nil {
			fmt.Fprintln(os.Stderr, "edgebench open loop:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.IntVar(&o.rounds, "rounds", 3, "interleaved rounds; the tables are their medians")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "each saturated wrk and h2load run (whole seconds)")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "an unmeasured run before each saturated one; 0 for none")
	flag.DurationVar(&o.openDuration, "open-duration", 2*time.Second, "each open-loop run's measured window")
	flag.DurationVar(&o.openWarmup, "open-warmup", 500*time.Millisecond, "the open-loop generator's unmeasured start, at the same rate")
	flag.IntVar(&o.connections, "connections", 64, "wrk's and h2load's connections")
	flag.IntVar(&o.threads, "threads", 2, "wrk's and h2load's threads")
	flag.IntVar(&o.streams, "streams", 10, "h2load's concurrent streams per connection (-m)")
	flag.IntVar(&o.openConnections, "open-connections", 32, "the open-loop generator's connections")
	flag.IntVar(&o.backends, "backends", 4, "echo backends behind both proxies")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of this process (the edge) over the whole run to `file`")
	flag.StringVar(&o.only, "only", "", "run only the runs whose progress label matches this `regexp` (e.g. 'off +edge plain +wrk'), to profile one of them with -cpuprofile; nginx plain's saturated run is kept when an open-loop run needs its rate; no summary")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := bench(ctx, o, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "edgebench:", err)
		os.Exit(1)
	}
}

type options struct {
	rounds                                         int
	duration, warmup, openDuration, openWarmup     time.Duration
	connections, threads, streams, openConnections int
	backends                                       int
	cpuprofile                                     string
	only                                           string
}

// harness is what the rounds run against.
type harness struct {
	o           options
	wrk, h2load string
	direct      string
	urls        map[endpoint]string
	cpu         map[string]cpuMeter // by proxy: "edge", "nginx"
	logs        []string            // the access logs' files, emptied after each run
}

// endpoint names a proxy's listener.
type endpoint struct {
	proxy     string // "edge" or "nginx"
	logs, tls bool
}

func bench(ctx context.Context, o options, out io.Writer) error {
	if o.rounds < 1 || o.backends < 1 || o.connections < 1 || o.threads < 1 || o.streams < 1 || o.openConnections < 1 ||
		o.duration < time.Second || o.openDuration <= 0 || o.warmup < 0 || o.openWarmup < 0 {
		return errors.New("need -rounds, -backends, -connections, -threads, -streams and -open-connections of at least 1, -duration of at least 1s, a positive -open-duration and no negative warm-up")
	}
	b := &harness{o: o, urls: map[endpoint]string{}, cpu: map[string]cpuMeter{"edge": selfCPU}}
	var err error
	if b.wrk, err = wrkPath(); err != nil {
		return err
	}
	if b.h2load, err = h2loadPath(); err != nil {
		return err
	}
	nginxBin, err := nginxPath()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "edgebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	be, err := startBackends(o.backends)
	if err != nil {
		return err
	}
	defer be.stop()
	b.direct = "http://" + be.addrs[0] + "/"

	ca, err := pki.NewCA("edgebench")
	if err != nil {
		return err
	}
	kp, err := ca.ServingCert("edgebench", []string{"127.0.0.1", "localhost"})
	if err != nil {
		return err
	}
	cert, err := kp.TLSCertificate()
	if err != nil {
		return err
	}

	ports, err := testkit.PickFreePorts(8)
	if err != nil {
		return err
	}
	// The same garbage collection setting as the fleetnet-edge binary.
	edgeapp.TuneGC()
	// Two edges, one without an access log and one with; each idles while
	// the other is measured.
	edgeLog, err := os.OpenFile(filepath.Join(dir, "edge-access.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer edgeLog.Close()
	b.logs = append(b.logs, edgeLog.Name())
	for i, logs := range []bool{false, true} {
		plain, secure := ports[2*i], ports[2*i+1]
		opts := proxy.Options{ListenHost: "127.0.0.1",
			Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
		if logs {
			// As nginx's access_log buffer=64k flush=1s, and the edge's
			// defaults: lines collected and written by another goroutine.
			w := accesslog.New(edgeLog, accesslog.Options{Buffer: 64 << 10, Flush: time.Second})
			defer w.Close()
			opts.AccessLog = w
		}
		edge := proxy.New(opts)
		if _, err := edge.Apply(benchModel(be.addrs, plain, secure), map[string]*tls.Certificate{"edgebench": &cert}); err != nil {
			return fmt.Errorf("applying the edge's model: %w", err)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = edge.Close(sctx)
		}()
		b.urls[endpoint{"edge", logs, false}] = "http://" + addr(plain) + "/"
		b.urls[endpoint{"edge", logs, true}] = "https://" + addr(secure) + "/"
	}

	workers := runtime.GOMAXPROCS(0)
	nginxLog := filepath.Join(dir, "nginx-access.log")
	b.logs = append(b.logs, nginxLog)
	servers := []nginxServer{
		{Plain: addr(ports[4]), TLS: addr(ports[5])},
		{Plain: addr(ports[6]), TLS: addr(ports[7]), AccessLog: nginxLog},
	}
	ngx, err := startNginx(nginxBin, dir, workers, servers, be.addrs, kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return err
	}
	defer ngx.stop()
	b.cpu["nginx"] = workersCPU(ngx.Cmd.Process.Pid)
	for i, s := range servers {
		b.urls[endpoint{"nginx", i == 1, false}] = "http://" + s.Plain + "/"
		b.urls[endpoint{"nginx", i == 1, true}] = "https://" + s.TLS + "/"
	}

	if err := check(b.direct); err != nil {
		return fmt.Errorf("the direct backend: %w", err)
	}
	for e, u := range b.urls {
		if err := check(u); err != nil {
			return fmt.Errorf("%s (logs %v) does not answer as the backends do: %w", e.proxy, e.logs, err)
		}
		if e.tls {
			host, _ := hostOf(u)
			conn, err := dialTLS(host, "http/1.1")
			if err != nil {
				return fmt.Errorf("%s (logs %v): %w", e.proxy, e.logs, err)
			}
			_ = conn.Close()
		}
	}
	if _, err := b.cpu["nginx"](); err != nil {
		return err
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

	runs, err := selectRuns(plan(), o.only)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "edgebench: %d CPUs, %s, the edge's GOMAXPROCS %d, %s with worker_processes %d, %d echo backends, %d interleaved rounds of %d runs\n",
		runtime.NumCPU(), runtime.Version(), workers, nginxVersion(nginxBin), workers, o.backends, o.rounds, len(runs))
	fmt.Fprintf(out, "  both proxies: HTTP/1.1 keep-alive to the backends (nginx: keepalive 256 per worker; the edge: its transport's pool), no limit of requests per connection;\n")
	fmt.Fprintf(out, "  TLS 1.3 with %s on both (nginx pinned to it, the Go edge prefers it; h2load and the open-loop generator check it);\n", tls.CipherSuiteName(benchCipher))
	fmt.Fprintf(out, "  access logs off, then on: to a file through a 64 KiB buffer flushed at least every second (nginx: combined format, buffer=64k flush=1s; the edge: JSON lines, internal/edge/accesslog)\n")
	fmt.Fprintf(out, "  saturated: wrk -t%d -c%d -d%s (HTTP/1.1, plain and TLS), h2load -t%d -c%d -m%d -D %s (h2 over TLS), each after a %s warm-up run\n",
		o.threads, o.connections, o.duration, o.threads, o.connections, o.streams, o.duration, o.warmup)
	fmt.Fprintf(out, "  open loop: %d keep-alive HTTP/1.1 connections from a child process at %v %% of the round's nginx plain saturated req/s (logs off; TLS and logs on at 50 %% only),\n"+
		"    %s warm-up + %s, latency from the scheduled send, given up %s after the window (unfinished)\n",
		o.openConnections, openPercents, o.openWarmup, o.openDuration, openDrain)
	fmt.Fprintf(out, "  CPU per request: nginx's workers (/proc/<pid>/stat), the edge's process (getrusage; backends and load generators are other processes)\n")

	var rounds []map[string]measure
	for i := range o.rounds {
		got := map[string]measure{}
		for _, r := range runs {
			m, err := b.measure(ctx, r, got)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", i+1, r.label(), err)
			}
			got[r.key()] = m
			fmt.Fprintf(out, "round %d/%d  %s\n", i+1, o.rounds, progress(r, m))
		}
		rounds = append(rounds, got)
	}
	if o.only != "" {
		fmt.Fprintf(out, "only the runs matching %q: no summary\n", o.only)
		return nil
	}
	report(out, runs, rounds)
	return nil
}

// measure runs r once. got holds the round's measurements so far, among
// them nginx plain's saturated rate that sets the open-loop rates.
func (b *harness) measure(ctx context.Context, r run, got map[string]measure) (measure, error) {
	target := b.direct
	if r.proxy != "direct" {
		target = b.urls[endpoint{r.proxy, r.logs, r.tls}]
	}
	cpu := b.cpu[r.proxy]
	var before time.Duration
	start := func() error {
		if cpu == nil {
			return nil
		}
		var err error
		before, err = cpu()
		return err
	}
	perRequest := func(requests int64) (time.Duration, error) {
		if cpu == nil || requests == 0 {
			return 0, nil
		}
		after, err := cpu()
		return (after - before) / time.Duration(requests), err
	}
	defer b.emptyLogs()

	var m measure
	switch r.tool {
	case toolWrk:
		if b.o.warmup > 0 {
			if _, err := runWrk(ctx, b.wrk, target, load{Threads: b.o.threads, Connections: b.o.connections, Duration: b.o.warmup}); err != nil {
				return m, err
			}
		}
		if err := start(); err != nil {
			return m, err
		}
		w, err := runWrk(ctx, b.wrk, target, load{Threads: b.o.threads, Connections: b.o.connections, Duration: b.o.duration})
		if err != nil {
			return m, err
		}
		m = measure{RPS: w.RPS, P50: w.P50, P99: w.P99, Requests: w.Requests, Errors: w.Errors}
		m.CPU, err = perRequest(w.Requests)
		return m, err
	case toolH2load:
		l := h2Load{Threads: b.o.threads, Connections: b.o.connections, Streams: b.o.streams, Duration: b.o.duration}
		if b.o.warmup > 0 {
			w := l
			w.Duration = b.o.warmup
			if _, err := runH2load(ctx, b.h2load, target, w); err != nil {
				return m, err
			}
		}
		if err := start(); err != nil {
			return m, err
		}
		h, err := runH2load(ctx, b.h2load, target, l)
		if err != nil {
			return m, err
		}
		m = measure{RPS: h.RPS, Mean: h.Mean, Requests: h.Requests, Errors: h.Errors}
		m.CPU, err = perRequest(h.Requests)
		return m, err
	default:
		base, ok := got[nginxPlain.key()]
		if !ok || base.RPS <= 0 {
			return m, errors.New("no saturated rate of nginx plain in this round to take the open-loop rate from")
		}
		ol := openLoop{URL: target, Rate: base.RPS * float64(r.pct) / 100, Connections: b.o.openConnections, Warmup: b.o.openWarmup, Duration: b.o.openDuration}
		if err := start(); err != nil {
			return m, err
		}
		res, err := runOpenLoop(ctx, ol)
		if err != nil {
			return m, err
		}
		m = measure{Rate: ol.Rate, RPS: float64(res.Done) / ol.Duration.Seconds(), P50: res.P50, P99: res.P99, P999: res.P999,
			Requests: res.Done, Errors: res.Errors, Unfinished: res.Unfinished}
		m.CPU, err = perRequest(res.All)
		return m, err
	}
}

// emptyLogs truncates the access logs between runs, so that the disk is
// not filled; both proxies append.
func (b *harness) emptyLogs() {
	for _, f := range b.logs {
		_ = os.Truncate(f, 0)
	}
}

func hostOf(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	return u.Host, nil
}

// benchModel is one Gateway with an HTTP and an HTTPS listener, each
// routing every path of every host to one ServiceImport whose endpoints
// are the backends, in one cluster.
func benchModel(backends []string, plain, secure int) *edgev1.Model {
	var eps []edgev1.Endpoint
	for _, a := range backends {
		host, p, _ := net.SplitHostPort(a)
		port, _ := strconv.Atoi(p)
		eps = append(eps, edgev1.Endpoint{Address: host, Port: int32(port), Ready: true, Serving: true})
	}
	route := edgev1.Route{RouteNamespace: "bench", RouteName: "echo", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"},
		Backends: []edgev1.Backend{{Kind: edgev1.KindServiceImport, Namespace: "bench", Name: "echo", Weight: 1,
			Clusters: []edgev1.ClusterEndpoints{{Cluster: "local", Weight: 1, EffectiveWeight: int64(len(eps)), Endpoints: eps}}}}}
	hosts := []edgev1.VirtualHost{{Hostname: "*", Routes: []edgev1.Route{route}}}
	return &edgev1.Model{Version: "edgebench", Gateways: []edgev1.Gateway{{Namespace: "bench", Name: "edge", Listeners: []edgev1.Listener{
		{Name: "http", Port: int32(plain), Protocol: edgev1.ProtocolHTTP, VirtualHosts: hosts},
		{Name: "https", Port: int32(secure), Protocol: edgev1.ProtocolHTTPS, VirtualHosts: hosts,
			Certificates: []edgev1.ListenerCertificate{{Namespace: "bench", Name: "tls", Digest: "edgebench"}}},
	}}}}
}

// check fetches target once and compares the answer with the backends' body.
func check(target string) error {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer c.CloseIdleConnections()
	resp, err := c.Get(target)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || string(got) != string(body) {
		return fmt.Errorf("%s: %d %q", target, resp.StatusCode, got)
	}
	return nil
}

func addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + "ms"
}
