// Command edgebench measures fleetnet-edge's data plane beside nginx in one
// run (issue 11, "Benchmarks"): both proxy the same echo backends on
// loopback and wrk loads each in turn, plain and through TLS. The direct
// backend is the baseline for the added p99.
//
//	go run ./test/edgebench -duration 10s
//
// The backends run in a child process; the edge runs in this one, so a
// -cpuprofile holds the edge's work only (nginx and wrk are other
// processes). It needs nginx and wrk from Debian:
// apt-get install nginx-light wrk.
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
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	edgeapp "github.com/fleetnet/fleetnet/internal/edge/app"
	"github.com/fleetnet/fleetnet/internal/edge/proxy"
	"github.com/fleetnet/fleetnet/internal/testkit"

	"github.com/fleetnet/fleetnet/internal/pki"
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
	var o options
	flag.DurationVar(&o.load.Duration, "duration", 10*time.Second, "wrk's duration per target (whole seconds)")
	flag.IntVar(&o.load.Connections, "connections", 64, "wrk's connections")
	flag.IntVar(&o.load.Threads, "threads", 2, "wrk's threads")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "an unmeasured wrk run before each target; 0 for none")
	flag.IntVar(&o.backends, "backends", 4, "echo backends behind both proxies")
	flag.StringVar(&o.workers, "nginx-workers", "auto", "nginx's worker_processes")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of this process (the edge) over the whole run to `file`")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "edgebench:", err)
		os.Exit(1)
	}
}

type options struct {
	load       load
	warmup     time.Duration
	backends   int
	workers    string
	cpuprofile string
}

// target is one thing wrk loads.
type target struct {
	name string
	url  string
}

func run(ctx context.Context, o options, out io.Writer) error {
	if o.backends < 1 || o.load.Connections < 1 || o.load.Threads < 1 || o.load.Duration < time.Second {
		return errors.New("need -backends, -connections and -threads of at least 1 and -duration of at least 1s")
	}
	wrk, err := wrkPath()
	if err != nil {
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

	ports, err := testkit.PickFreePorts(4)
	if err != nil {
		return err
	}
	edgePlain, edgeTLS, nginxPlain, nginxTLS := ports[0], ports[1], ports[2], ports[3]
	// The same garbage collection setting as the fleetnet-edge binary.
	edgeapp.TuneGC()
	edge := proxy.New(proxy.Options{
		ListenHost: "127.0.0.1",
		Log:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err := edge.Apply(benchModel(be.addrs, edgePlain, edgeTLS), map[string]*tls.Certificate{"edgebench": &cert}); err != nil {
		return fmt.Errorf("applying the edge's model: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = edge.Close(sctx)
	}()

	ngx, err := startNginx(nginxBin, dir, o.workers, addr(nginxPlain), addr(nginxTLS), be.addrs, kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return err
	}
	defer ngx.stop()

	targets := []target{
		{"direct (backend 1)", "http://" + be.addrs[0] + "/"},
		{"edge plain", "http://" + addr(edgePlain) + "/"},
		{"nginx plain", "http://" + addr(nginxPlain) + "/"},
		{"edge TLS", "https://" + addr(edgeTLS) + "/"},
		{"nginx TLS", "https://" + addr(nginxTLS) + "/"},
	}
	for _, t := range targets {
		if err := check(t.url); err != nil {
			return fmt.Errorf("%s does not answer as the backends do: %w", t.name, err)
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

	fmt.Fprintf(out, "edgebench: %d CPUs, %s, nginx %s (workers %s), wrk -t%d -c%d -d%s --latency, %d backends, warm-up %s per target\n",
		runtime.NumCPU(), runtime.Version(), nginxVersion(nginxBin), o.workers, o.load.Threads, o.load.Connections, o.load.Duration, o.backends, o.warmup)
	results := map[string]result{}
	for _, t := range targets {
		if o.warmup > 0 {
			if _, err := runWrk(ctx, wrk, t.url, load{Threads: o.load.Threads, Connections: o.load.Connections, Duration: o.warmup}); err != nil {
				return err
			}
		}
		r, err := runWrk(ctx, wrk, t.url, o.load)
		if err != nil {
			return err
		}
		results[t.name] = r
		fmt.Fprintf(out, "  %-18s done: %.0f req/s\n", t.name, r.RPS)
	}
	printTable(out, targets, results)
	return nil
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

// check fetches url once and compares the answer with the backends' body.
func check(url string) error {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer c.CloseIdleConnections()
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || string(got) != string(body) {
		return fmt.Errorf("%s: %d %q", url, resp.StatusCode, got)
	}
	return nil
}

func addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

func printTable(out io.Writer, targets []target, results map[string]result) {
	base := results[targets[0].name].P99
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "target\treq/s\tp50\tp99\tadded p99\trequests\terrors\t")
	for i, t := range targets {
		r := results[t.name]
		added := "-"
		if i > 0 {
			added = ms(r.P99 - base)
		}
		fmt.Fprintf(w, "%s\t%.0f\t%s\t%s\t%s\t%d\t%d\t\n", t.name, r.RPS, ms(r.P50), ms(r.P99), added, r.Requests, r.Errors)
	}
	_ = w.Flush()
	fmt.Fprintln(out)
	for _, mode := range []string{"plain", "TLS"} {
		e, n := results["edge "+mode], results["nginx "+mode]
		fmt.Fprintf(out, "%-5s edge/nginx throughput %.2f (goal >= 1), edge added p99 %s (goal < 1ms), nginx added p99 %s\n",
			mode, e.RPS/n.RPS, ms(e.P99-base), ms(n.P99-base))
	}
	fmt.Fprintln(out, "added p99 is the target's p99 minus the direct backend's (plain HTTP, one backend).")
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + "ms"
}
