//go:build chaos

package e2e

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/fleetnet/fleetnet/internal/dev"
	"github.com/fleetnet/fleetnet/internal/testkit"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// `make chaos` (CHAOS_DURATION, CHAOS_SEED) sets these.
var (
	chaosDuration = flag.Duration("chaos.duration", 10*time.Minute, "how long faults are injected")
	chaosSeed     = flag.Uint64("chaos.seed", 0, "the faults' random seed; 0 picks one (printed, to run the same faults again)")
)

// The chaos run needs what production runs: a 3-member etcd and two
// registry replicas.
func init() {
	haFleet = true
}

// Bounds of the run's invariants.
const (
	// leaseSlack is how long after the lease TTL an import may still list
	// a cluster whose export is gone (the bound: TTL + 2 s).
	leaseSlack = 2 * time.Second
	// convergeBound is how long the fleet may take to converge after a
	// fault ends before the run calls it a failure.
	convergeBound = 90 * time.Second
	// edgeRestartSlack is how long after an edge is back a client may
	// still fail (connections to the killed process, listeners opening).
	edgeRestartSlack = 3 * time.Second
	// steadyExports are exported by east and west for the whole run: their
	// imports must never be deleted or re-made anywhere.
	steadyExports = 3
)

// TestChaos runs the fleet under steady export churn and HTTP traffic
// through the edge while it kills registry replicas, etcd members, agents,
// the gateway and the edge, and pauses API servers, one fault at a time,
// and checks throughout and after that nothing is lost:
//
//   - every acknowledged export is imported everywhere once a fault ends
//     (within convergeBound; the longest convergence is reported);
//   - no import is deleted or made anew while one of its exporters lives
//     (nothing is deleted on partial knowledge);
//   - no import lists a cluster whose export is gone, or whose agent is
//     down, for longer than the lease TTL + 2 s, in a cluster whose agent
//     and API server run;
//   - requests through the edge fail only while the edge itself is down.
func TestChaos(t *testing.T) {
	if err := dev.NodeRequirements(); err != nil {
		t.Fatalf("%v (make chaos runs as root)", err)
	}
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	fmt.Printf("chaos: seed %d (make chaos CHAOS_SEED=%d runs the same faults), %s of faults\n", seed, seed, *chaosDuration)
	ns := namespace(t, "chaos")
	c := &chaos{t: t, ns: ns, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), windows: map[string][]window{},
		paused: map[string]bool{}, locks: map[string]*sync.RWMutex{}, live: map[string]string{}, deleted: map[string]gone{},
		steady: map[string]seen{}}
	for _, cl := range clusters {
		c.locks[cl] = &sync.RWMutex{}
	}
	c.setUp()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { c.traffic(ctx) })
	}
	wg.Go(func() { c.churn(ctx) })
	wg.Go(func() { c.check(ctx) })

	started := time.Now()
	for time.Since(started) < *chaosDuration && !t.Failed() {
		c.fault()
		c.sleep(2*time.Second, 5*time.Second)
	}
	cancel()
	wg.Wait()
	// After the last fault: the whole fleet converges, with nothing lost.
	end := time.Now()
	c.up()
	took, err := c.converge(end)
	if err != nil {
		c.violation("after the run: %v", err)
	}
	c.report(took, c.lost())
}

// window is a time during which a fault disturbs a target: a cluster (its
// agent or API server) or the edge. The fault ends at restart (the process
// started again or resumed); the target is back at to, once the fleet
// says it runs (dev up returned). Both are zero before.
type window struct {
	kind              string
	from, restart, to time.Time
}

// gone is an export that was deleted.
type gone struct {
	cluster string
	at      time.Time
}

// seen is what a cluster showed of a steady import.
type seen struct {
	uid types.UID
	ips []string
}

type faultRecord struct {
	kind, target string
	held         time.Duration
	converged    time.Duration
}

type chaos struct {
	t   *testing.T
	ns  string
	rng *rand.Rand
	url string

	mu      sync.Mutex
	windows map[string][]window
	paused  map[string]bool
	// locks keep churn requests off a cluster while its API server is
	// paused: a request caught by the pause would leave the export's fate
	// unknown.
	locks   map[string]*sync.RWMutex
	live    map[string]string // churn export → its cluster, acknowledged
	deleted map[string]gone
	// steady holds each cluster's view of the steady imports, by
	// "cluster/name".
	steady     map[string]seen
	faults     []faultRecord
	violations []string
	unexpected []string

	written, removed, writeErrors    atomic.Int64
	served, failedAllowed, failedBad atomic.Int64
}

func (c *chaos) violation(format string, args ...any) {
	msg := fmt.Sprintf("%s %s", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	c.mu.Lock()
	c.violations = append(c.violations, msg)
	c.mu.Unlock()
	c.t.Errorf("invariant broken: %s", msg)
}

// setUp exports echo (served by pods in east and west) and the steady
// Services from east and west, routes the edge to echo, and waits until
// all of it is imported and answers.
func (c *chaos) setUp() {
	t := c.t
	ctx := context.Background()
	for _, cl := range []string{"east", "west"} {
		serveEcho(t, cl, c.ns, "echo", 1, false)
		if err := kube(t, cl).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: "echo"}}); err != nil {
			t.Fatal(err)
		}
		for i := range steadyExports {
			if err := c.createExport(ctx, cl, fmt.Sprintf("steady-%d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	port := gatewayToEcho(t, c.ns, "chaos")
	c.url = fmt.Sprintf("http://127.0.0.1:%d/", port)
	testkit.Eventually(t, 2*time.Minute, "echo and the steady exports imported everywhere, and the edge answering", func(ctx context.Context) error {
		for _, cl := range clusters {
			for _, name := range c.steadyNames() {
				si := &mcsv1beta1.ServiceImport{}
				if err := kube(t, cl).Get(ctx, client.ObjectKey{Namespace: c.ns, Name: name}, si); err != nil {
					return fmt.Errorf("%s: %w", cl, err)
				}
				if got := statusClusters(si); !slices.Equal(got, []string{"east", "west"}) {
					return fmt.Errorf("%s: %s from %v", cl, name, got)
				}
			}
		}
		gw := &gwv1.Gateway{}
		if err := kube(t, "hub").Get(ctx, client.ObjectKey{Namespace: c.ns, Name: "edge"}, gw); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed)) {
			return fmt.Errorf("Gateway not Programmed: %+v", gw.Status.Conditions)
		}
		return c.get()
	})
}

func (c *chaos) steadyNames() []string {
	out := []string{"echo"}
	for i := range steadyExports {
		out = append(out, fmt.Sprintf("steady-%d", i))
	}
	return out
}

// createExport makes a Service without a selector and its ServiceExport.
func (c *chaos) createExport(ctx context.Context, cluster, name string) error {
	cl := kube(c.t, cluster)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	if err := cl.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s: Service %s: %w", cluster, name, err)
	}
	if err := cl.Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s: ServiceExport %s: %w", cluster, name, err)
	}
	return nil
}

var chaosHTTP = &http.Client{Timeout: 2 * time.Second}

func (c *chaos) get() error { return getEcho(chaosHTTP, c.url) }

// traffic sends requests through the edge; a failure is allowed only when
// the edge was disturbed while the request ran.
func (c *chaos) traffic(ctx context.Context) {
	for ctx.Err() == nil {
		start := time.Now()
		err := c.get()
		switch {
		case err == nil:
			c.served.Add(1)
		case c.disturbedDuring("edge", start, time.Now()):
			c.failedAllowed.Add(1)
		default:
			c.failedBad.Add(1)
			c.mu.Lock()
			if len(c.unexpected) < 20 {
				c.unexpected = append(c.unexpected, fmt.Sprintf("%s %v", start.Format("15:04:05.000"), err))
			}
			c.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// churn creates and deletes exports in clusters whose API server runs.
func (c *chaos) churn(ctx context.Context) {
	n := 0
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(300+c.intn(700)) * time.Millisecond):
		}
		c.mu.Lock()
		var names []string
		for name := range c.live {
			names = append(names, name)
		}
		c.mu.Unlock()
		sort.Strings(names)
		create := len(names) < 10 || (len(names) < 40 && c.intn(10) < 6)
		if create {
			cluster := clusters[c.intn(len(clusters))]
			n++
			name := fmt.Sprintf("churn-%d", n)
			c.onCluster(cluster, func() {
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				if err := c.createExport(rctx, cluster, name); err != nil {
					c.writeErrors.Add(1)
					return
				}
				c.written.Add(1)
				c.mu.Lock()
				c.live[name] = cluster
				c.mu.Unlock()
			})
			continue
		}
		name := names[c.intn(len(names))]
		c.mu.Lock()
		cluster := c.live[name]
		c.mu.Unlock()
		c.onCluster(cluster, func() {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			cl := kube(c.t, cluster)
			at := time.Now()
			err := cl.Delete(rctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name}})
			if err != nil && !apierrors.IsNotFound(err) {
				c.writeErrors.Add(1)
				return
			}
			c.removed.Add(1)
			c.mu.Lock()
			delete(c.live, name)
			c.deleted[name] = gone{cluster: cluster, at: at}
			c.mu.Unlock()
			_ = cl.Delete(rctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name}})
		})
	}
}

// onCluster runs f unless the cluster's API server is paused.
func (c *chaos) onCluster(cluster string, f func()) {
	l := c.locks[cluster]
	l.RLock()
	defer l.RUnlock()
	c.mu.Lock()
	paused := c.paused[cluster]
	c.mu.Unlock()
	if !paused {
		f()
	}
}

// check reads every running cluster's imports each second and holds them
// to the invariants.
func (c *chaos) check(ctx context.Context) {
	for ctx.Err() == nil {
		for _, cl := range clusters {
			c.checkCluster(ctx, cl)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (c *chaos) checkCluster(ctx context.Context, cluster string) {
	c.mu.Lock()
	paused := c.paused[cluster]
	c.mu.Unlock()
	if paused {
		return
	}
	at := time.Now()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list := &mcsv1beta1.ServiceImportList{}
	if err := kube(c.t, cluster).List(rctx, list, client.InNamespace(c.ns)); err != nil {
		return // the API server paused or its etcd member died: next round
	}
	imports := map[string]*mcsv1beta1.ServiceImport{}
	for i := range list.Items {
		imports[list.Items[i].Name] = &list.Items[i]
	}
	ttl := state.LeaseTTL
	c.mu.Lock()
	defer c.mu.Unlock()
	// Steady imports are never deleted or made anew: one of their two
	// exporters always lives.
	for _, name := range c.steadyNames() {
		key := cluster + "/" + name
		si := imports[name]
		if si == nil {
			if _, ok := c.steady[key]; ok {
				c.violationLocked("%s: the import %s is gone while its exporters live (deleted on partial knowledge?)", cluster, name)
				delete(c.steady, key)
			}
			continue
		}
		now := seen{uid: si.UID, ips: slices.Clone(si.Spec.IPs)}
		if before, ok := c.steady[key]; ok && (before.uid != now.uid || !slices.Equal(before.ips, now.ips)) {
			c.violationLocked("%s: the import %s was made anew (uid %s → %s, ips %v → %v)", cluster, name, before.uid, now.uid, before.ips, now.ips)
		}
		c.steady[key] = now
		// A cluster whose agent is down leaves its imports within the TTL.
		for _, exporter := range statusClusters(si) {
			for _, w := range c.windows[exporter] {
				if w.kind == faultKillAgent && w.restart.IsZero() && at.After(w.from.Add(ttl+leaseSlack)) && !c.disturbedSinceLocked(cluster, w.from) {
					c.violationLocked("%s: the import %s still lists %s, whose agent has been down since %s (TTL %s)", cluster, name, exporter, w.from.Format("15:04:05.000"), ttl)
				}
			}
		}
	}
	// A deleted export leaves every import within the TTL + 2 s of its
	// deletion, or of the end of a fault that kept the news from the
	// cluster.
	for name, si := range imports {
		g, ok := c.deleted[name]
		if !ok || !slices.Contains(statusClusters(si), g.cluster) {
			continue
		}
		from, ok := c.settledSinceLocked(g.at, at, cluster, g.cluster)
		if ok && at.After(from.Add(ttl+leaseSlack)) {
			c.violationLocked("%s: the import %s lists %s, whose export was deleted at %s", cluster, name, g.cluster, g.at.Format("15:04:05.000"))
			delete(c.deleted, name) // once
		}
	}
}

func (c *chaos) violationLocked(format string, args ...any) {
	msg := fmt.Sprintf("%s %s", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	c.violations = append(c.violations, msg)
	c.t.Errorf("invariant broken: %s", msg)
}

// disturbedSinceLocked reports whether a fault disturbed target after from.
func (c *chaos) disturbedSinceLocked(target string, from time.Time) bool {
	for _, w := range c.windows[target] {
		if w.to.IsZero() || w.to.After(from) {
			return true
		}
	}
	return false
}

// settledSinceLocked returns the latest of from and the ends of the
// targets' faults that overlap [from, at]; false while one lasts.
func (c *chaos) settledSinceLocked(from, at time.Time, targets ...string) (time.Time, bool) {
	for _, target := range targets {
		for _, w := range c.windows[target] {
			if w.to.IsZero() {
				return time.Time{}, false
			}
			if w.to.After(from) && w.from.Before(at) {
				from = w.to
			}
		}
	}
	return from, true
}

// disturbedDuring reports whether a fault of target overlapped [from, to].
func (c *chaos) disturbedDuring(target string, from, to time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.windows[target] {
		end := w.to
		if end.IsZero() {
			end = to
		}
		if !w.from.After(to) && !end.Before(from) {
			return true
		}
	}
	return false
}

func (c *chaos) intn(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.IntN(n)
}

func (c *chaos) sleep(least, most time.Duration) {
	time.Sleep(least + time.Duration(c.intn(int(most-least)/int(time.Millisecond)))*time.Millisecond)
}

// Kinds of faults.
const (
	faultKillRegistry = "kill a registry replica"
	faultKillEtcd     = "kill an etcd member"
	faultKillAgent    = "kill an agent"
	faultKillGateway  = "kill the gateway"
	faultKillEdge     = "kill the edge"
	faultPauseAPI     = "pause an API server"
)

var faultKinds = []string{faultKillRegistry, faultKillEtcd, faultKillAgent, faultKillGateway, faultKillEdge, faultPauseAPI}

// fault injects one fault at random, holds it for 2 to 12 s (an agent's
// for longer than the lease TTL about half the time), ends it, and waits
// until the fleet has converged again.
func (c *chaos) fault() {
	t := c.t
	kind := faultKinds[c.intn(len(faultKinds))]
	var component, target string
	switch kind {
	case faultKillRegistry:
		component = state.RegistryReplicas()[c.intn(len(state.RegistryReplicas()))]
	case faultKillEtcd:
		component = state.EtcdMembers()[c.intn(len(state.EtcdMembers()))]
	case faultKillAgent:
		target = clusters[c.intn(len(clusters))]
		component = target + "/" + dev.PartAgent
	case faultKillGateway:
		component = dev.ComponentGateway
	case faultKillEdge:
		component, target = dev.ComponentEdge, "edge"
	case faultPauseAPI:
		target = clusters[c.intn(len(clusters))]
		component = target + "/" + dev.PartAPIServer
	}
	begin := func() {
		if target == "" {
			return
		}
		c.mu.Lock()
		c.windows[target] = append(c.windows[target], window{kind: kind, from: time.Now()})
		c.mu.Unlock()
	}
	var restartedAt time.Time
	restart := func() {
		restartedAt = time.Now()
		if target == "" {
			return
		}
		c.mu.Lock()
		ws := c.windows[target]
		ws[len(ws)-1].restart = time.Now()
		c.mu.Unlock()
	}
	end := func(slack time.Duration) {
		if target == "" {
			return
		}
		c.mu.Lock()
		ws := c.windows[target]
		ws[len(ws)-1].to = time.Now().Add(slack)
		c.mu.Unlock()
	}
	start := time.Now()
	if kind == faultPauseAPI {
		pid := state.Processes[component].Pid
		l := c.locks[target]
		l.Lock()
		c.mu.Lock()
		c.paused[target] = true
		c.mu.Unlock()
		l.Unlock()
		begin()
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("pausing %s: %v", component, err)
		}
		c.sleep(2*time.Second, 10*time.Second)
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Fatalf("resuming %s: %v", component, err)
		}
		c.mu.Lock()
		c.paused[target] = false
		c.mu.Unlock()
		restart()
		c.up()
		end(0)
	} else {
		begin()
		stop(t, component, true)
		c.sleep(2*time.Second, 12*time.Second)
		restart()
		c.up()
		slack := time.Duration(0)
		if kind == faultKillEdge {
			slack = edgeRestartSlack
		}
		end(slack)
	}
	held := restartedAt.Sub(start)
	took, err := c.converge(restartedAt)
	if err != nil {
		c.violation("%s (%s), held %s: no convergence: %v", kind, component, held.Round(time.Millisecond), err)
	}
	c.mu.Lock()
	c.faults = append(c.faults, faultRecord{kind: kind, target: component, held: held, converged: took})
	c.mu.Unlock()
	fmt.Printf("chaos: %s %-28s %-22s held %6s, converged in %s\n", time.Now().Format("15:04:05"), kind, component, held.Round(100*time.Millisecond), took.Round(100*time.Millisecond))
}

// up starts whatever of the fleet is not running.
func (c *chaos) up() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := dev.Up(ctx, devOptions)
	if err != nil {
		c.t.Fatalf("starting the fleet again: %v", err)
	}
	state = s
}

// converge waits until every live export is imported in every cluster,
// from its cluster, and the edge answers; it returns how long that took
// since the fault ended (the process restarted or resumed).
func (c *chaos) converge(since time.Time) (time.Duration, error) {
	start := since
	var last error
	slow := false
	for time.Since(start) < convergeBound {
		if last = c.converged(); last == nil {
			return time.Since(start), nil
		}
		if !slow && time.Since(start) > 10*time.Second {
			// Say what a slow convergence waits for, to find its cause.
			slow = true
			fmt.Printf("chaos: %s not converged after %s: %v\n", time.Now().Format("15:04:05"), time.Since(start).Round(time.Second), last)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return time.Since(start), last
}

func (c *chaos) converged() error {
	missing, err := c.missing()
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("%d imports not in place: %s", len(missing), strings.Join(first(missing, 5), "; "))
	}
	return c.get()
}

// lost lists the acknowledged exports that are not imported everywhere
// after the run.
func (c *chaos) lost() []string {
	missing, err := c.missing()
	if err != nil {
		return []string{err.Error()}
	}
	return missing
}

// missing lists the live exports that some cluster does not import from
// their cluster.
func (c *chaos) missing() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var missing []string
	for _, cl := range clusters {
		list := &mcsv1beta1.ServiceImportList{}
		if err := kube(c.t, cl).List(ctx, list, client.InNamespace(c.ns)); err != nil {
			return nil, fmt.Errorf("%s: %w", cl, err)
		}
		have := map[string][]string{}
		for _, si := range list.Items {
			have[si.Name] = statusClusters(&si)
		}
		c.mu.Lock()
		want := map[string][]string{}
		for name, from := range c.live {
			want[name] = []string{from}
		}
		c.mu.Unlock()
		for _, name := range c.steadyNames() {
			want[name] = []string{"east", "west"}
		}
		for name, from := range want {
			if !slices.Equal(have[name], from) {
				// The churn may have deleted it since: look again.
				c.mu.Lock()
				_, stillLive := c.live[name]
				c.mu.Unlock()
				if stillLive || strings.HasPrefix(name, "steady-") || name == "echo" {
					missing = append(missing, fmt.Sprintf("%s: %s from %v (has %v)", cl, name, from, have[name]))
				}
			}
		}
	}
	sort.Strings(missing)
	return missing, nil
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}

func (c *chaos) report(final time.Duration, lost []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "\nchaos: faults injected\tcount\tlongest hold\tlongest convergence (from the restart)")
	byKind := map[string][]faultRecord{}
	for _, f := range c.faults {
		byKind[f.kind] = append(byKind[f.kind], f)
	}
	var longest faultRecord
	for _, kind := range faultKinds {
		var hold, conv time.Duration
		for _, f := range byKind[kind] {
			hold, conv = max(hold, f.held), max(conv, f.converged)
			if f.converged > longest.converged {
				longest = f
			}
		}
		fmt.Fprintf(w, "  %s\t%d\t%s\t%s\n", kind, len(byKind[kind]), hold.Round(100*time.Millisecond), conv.Round(100*time.Millisecond))
	}
	w.Flush()
	fmt.Printf("chaos: longest convergence after a fault: %s (%s of %s); after the run: %s\n",
		longest.converged.Round(100*time.Millisecond), longest.kind, longest.target, final.Round(100*time.Millisecond))
	fmt.Printf("chaos: requests through the edge: %d served, %d failed while the edge was down, %d failed otherwise\n",
		c.served.Load(), c.failedAllowed.Load(), c.failedBad.Load())
	for _, u := range c.unexpected {
		fmt.Printf("  failed: %s\n", u)
	}
	fmt.Printf("chaos: exports written %d, deleted %d, live at the end %d, lost %d; writes refused or timed out %d (not acknowledged)\n",
		c.written.Load(), c.removed.Load(), len(c.live), len(lost), c.writeErrors.Load())
	for _, l := range lost {
		fmt.Printf("  lost: %s\n", l)
	}
	fmt.Printf("chaos: invariants broken: %d\n", len(c.violations))
	for _, v := range c.violations {
		fmt.Printf("  %s\n", v)
	}
	if c.failedBad.Load() > 0 {
		c.t.Errorf("%d requests through the edge failed while the edge ran", c.failedBad.Load())
	}
}
