package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	dnsapp "github.com/fleetnet/fleetnet/internal/dns/app"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/miekg/dns"
	"k8s.io/klog/v2"

	// CoreDNS's kubernetes plugin, for the cluster.local side; fleetnet-dns'
	// own plugins come with its app.
	_ "github.com/coredns/coredns/plugin/kubernetes"
)

// corefileEnv, when set, makes this program a DNS server running the
// Corefile it names, until SIGTERM.
const corefileEnv = "DNSBENCH_COREFILE"

// serve is the child: fleetnet-dns' app with a Corefile.
func serve(path string) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	slog.SetDefault(log)
	klog.SetSlogLogger(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return dnsapp.Run(ctx, dnsapp.Options{Corefile: path}, log)
}

// corefile is the Corefile of one config: the same plugins for both
// servers, only the answering one differs. fleetnet-dns' comes from its
// own flags, as the binary builds it.
func corefile(c config, port, metrics, health, ready int, kubeconfig string, ttl time.Duration) string {
	addr := func(p int) string { return fmt.Sprintf("127.0.0.1:%d", p) }
	var s string
	if c.zone == "clusterset.local" {
		o := dnsapp.Options{Listen: addr(port), Zone: c.zone, TTL: ttl, Kubeconfig: kubeconfig,
			MetricsAddr: addr(metrics), HealthAddr: addr(health), ReadyAddr: addr(ready)}
		s = o.BuildCorefile()
	} else {
		s = fmt.Sprintf(`%s.:%d {
    bind 127.0.0.1
    errors
    health %s
    ready %s
    prometheus %s
    cache %d
    kubernetes %s {
        kubeconfig %q
        ttl %d
    }
}
`, c.zone, port, addr(health), addr(ready), addr(metrics), ttl/time.Second, c.zone, kubeconfig, ttl/time.Second)
	}
	if !c.cache {
		var kept []string
		for l := range strings.SplitSeq(s, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "cache ") {
				kept = append(kept, l)
			}
		}
		s = strings.Join(kept, "\n")
	}
	return s
}

// measure starts config c's server, checks every name's answer, loads it
// and reads its memory.
func measure(ctx context.Context, dir, kubeconfig string, c config, svcs []service, o options) (outcome, error) {
	var res outcome
	ports, err := testkit.PickFreePorts(4) // for TCP and UDP alike: a DNS server binds both
	if err != nil {
		return res, err
	}
	name := strings.ReplaceAll(fmt.Sprintf("%s-%s-cache-%v", c.name, c.zone, c.cache), " ", "-")
	path := filepath.Join(dir, name+".Corefile")
	if err := os.WriteFile(path, []byte(corefile(c, ports[0], ports[1], ports[2], ports[3], kubeconfig, o.ttl)), 0o600); err != nil {
		return res, err
	}
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return res, err
	}
	defer logFile.Close()
	cmd, err := testkit.SelfCommand(corefileEnv + "=" + path)
	if err != nil {
		return res, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start := time.Now()
	server, err := testkit.Start(cmd)
	if err != nil {
		return res, err
	}
	defer server.Stop(syscall.SIGTERM, 10*time.Second)
	fail := func(err error) (outcome, error) {
		return res, fmt.Errorf("%w (log %s:\n%s)", err, logPath, tail(logPath, 20))
	}
	if err := waitReady(ctx, fmt.Sprintf("http://127.0.0.1:%d/ready", ports[3]), 2*time.Minute); err != nil {
		return fail(err)
	}
	res.ready = time.Since(start)

	dnsAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	// CoreDNS runs its plugins' start-up (the kubernetes plugin waits
	// there for its caches) before it binds the DNS listeners, so /ready
	// can answer a moment before DNS does.
	first := fmt.Sprintf("%s.%s.svc.%s.", svcs[0].name, svcs[0].namespace, c.zone)
	answers := func(context.Context) error { return checkAnswer(dnsAddr, first, svcs[0].clusterIP) }
	if err := testkit.Poll(ctx, 10*time.Second, answers); err != nil {
		return fail(err)
	}
	names := make([]string, len(svcs))
	for i, s := range svcs {
		names[i] = fmt.Sprintf("%s.%s.svc.%s.", s.name, s.namespace, c.zone)
		if err := checkAnswer(dnsAddr, names[i], s.clusterIP); err != nil {
			return fail(err)
		}
	}
	time.Sleep(time.Second)
	if res.rssIdle, _, err = memory(cmd.Process.Pid); err != nil {
		return res, err
	}
	queries, err := packQueries(names)
	if err != nil {
		return res, err
	}
	if o.warmup > 0 {
		if _, err := load(ctx, dnsAddr, queries, o.concurrency, o.warmup); err != nil {
			return fail(err)
		}
	}
	cpu0, err := cpuTime(cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	if res.load, err = load(ctx, dnsAddr, queries, o.concurrency, o.duration); err != nil {
		return fail(err)
	}
	cpu1, err := cpuTime(cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	res.cpu = cpu1 - cpu0
	if res.rssAfter, res.hwm, err = memory(cmd.Process.Pid); err != nil {
		return res, err
	}
	return res, ctx.Err()
}

// checkAnswer asks for name once and wants exactly ip.
func checkAnswer(addr, name, ip string) error {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	r, err := dns.Exchange(m, addr)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != ip {
		return fmt.Errorf("%s: %s %v, want %s", name, dns.RcodeToString[r.Rcode], r.Answer, ip)
	}
	return nil
}

func waitReady(ctx context.Context, url string, timeout time.Duration) error {
	err := testkit.Poll(ctx, timeout, func(context.Context) error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s", resp.Status)
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%s not ready: %w", url, err)
	}
	return err
}

// memory returns a process's resident set and its peak, in kB, from
// /proc/<pid>/status.
func memory(pid int) (rss, hwm int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("reading the server's memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			hwm = n
		}
	}
	return rss, hwm, sc.Err()
}

// userHZ is the unit of /proc/<pid>/stat's CPU times: always 100 per
// second in what Linux shows user space (proc(5)).
const userHZ = 100

// cpuTime returns the CPU time a process has used, user and system, from
// /proc/<pid>/stat. The server's CPU per query does not depend on how
// much of the machine the load generator takes, which its rate does.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the server's CPU time: %w", err)
	}
	// The command name, in parentheses, may hold spaces: fields count from
	// after its closing parenthesis (field 3, state, first).
	i := strings.LastIndexByte(string(b), ')')
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(fields[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, fields[11], fields[12])
	}
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
