//go:build upgrade

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/dev"
	registryclient "github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/internal/version"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// `make test-upgrade` runs this file: the fleet (HA: 3 etcd members, two
// registry replicas) starts on the previous release, built from the
// commit hack/previous-release names, and is upgraded to this checkout
// component by component in docs/upgrades.md's order, then rolled back,
// under traffic.
func init() {
	haFleet = true
	startBinaries = buildPreviousRelease
}

// buildPreviousRelease builds the commit of hack/previous-release (from
// git's objects, without touching the checkout) into tmp/previous/bin.
func buildPreviousRelease(tmp, checkout string) (string, error) {
	pin, err := os.ReadFile(filepath.Join(checkout, "hack", "previous-release"))
	if err != nil {
		return "", err
	}
	var commit string
	for line := range strings.Lines(string(pin)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			commit = line
		}
	}
	src := filepath.Join(tmp, "previous", "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.Command("sh", "-c", fmt.Sprintf("git archive --format=tar %s | tar -x -C %s", commit, src))
	archive.Dir = checkout
	if out, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("the previous release's commit %s (hack/previous-release) is not in this clone (a shallow clone? fetch the history: git fetch --unshallow): %w\n%s", commit, err, out)
	}
	bin := filepath.Join(tmp, "previous", "bin")
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/...")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the previous release %s: %w\n%s", commit, err, out)
	}
	fmt.Fprintf(os.Stderr, "e2e: the fleet starts on the previous release, commit %s\n", commit[:min(12, len(commit))])
	return bin, nil
}

// upgradeSteady is how many Services east and west both export besides
// echo: imports that must never go while the fleet is upgraded.
const upgradeSteady = 10

// upgrade is one run's traffic, checks and figures.
type upgrade struct {
	t   *testing.T
	ns  string
	url string // echo through the edge

	mu sync.Mutex
	// edgeDown are the windows in which the edge was being replaced:
	// requests through it may fail then and only then (one edge; with
	// two behind a load balancer none would).
	edgeDown   [][2]time.Time
	violations []string
	// seen is each cluster's steady import: its uid and ClusterSetIPs.
	seen map[string]seenImport
	// partial counts the checks that found a steady import without one of
	// its two exporters.
	partial int

	edgeServed, edgeFailed, edgeFailedWhileDown atomic.Int64
	// replacingEdge is set while the edge is being replaced.
	replacingEdge atomic.Bool
}

type seenImport struct {
	uid types.UID
	ips []string
}

// TestUpgradeAndRollBackUnderTraffic upgrades the fleet from the previous
// release to this checkout in docs/upgrades.md's order (registry replicas
// one at a time, agents, fleetnet-gateway, the edge, discovery and the
// console), running the MCS checks on the mixed fleet half-way (registry
// and two agents new, west's agent old), then rolls it back in reverse.
// Throughout, traffic runs through the edge and through the ClusterSetIP
// from a pod in hub. It fails when an import is withdrawn or made anew,
// an export is lost, a request through the ClusterSetIP fails, or one
// through the edge fails while the edge is not being replaced.
func TestUpgradeAndRollBackUnderTraffic(t *testing.T) {
	if err := dev.NodeRequirements(); err != nil {
		t.Fatalf("%v (make test-upgrade runs as root)", err)
	}
	u := &upgrade{t: t, ns: namespace(t, "upgrade"), seen: map[string]seenImport{}}
	u.setUp()
	ip := u.clusterSetIP()
	loop := fmt.Sprintf(`while true; do c=$(curl -s -o /dev/null --max-time 2 -w '%%{http_code}' http://%s/); echo "$(date +%%s%%3N) $c"; sleep 0.1; done`, net.JoinHostPort(ip, "80"))
	looper := u.startLoop("hub", "looper", loop)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { u.traffic(ctx) })
	wg.Go(func() { u.check(ctx) })

	previous, current := startedWith, fleetnet
	s := state
	forward := append(append([]string{}, s.RegistryReplicas()...), "hub/"+dev.PartAgent, "east/"+dev.PartAgent)
	rest := []string{"west/" + dev.PartAgent, dev.ComponentGateway, dev.ComponentEdge, dev.ComponentDiscovery, dev.ComponentConsole}
	started := time.Now()
	var took []string
	for _, c := range forward {
		took = append(took, u.replace(c, current))
	}
	u.mixedFleetChecks()
	for _, c := range rest {
		took = append(took, u.replace(c, current))
	}
	u.agentVersions(map[string]string{"hub": version.Get().Version, "east": version.Get().Version, "west": version.Get().Version})
	u.policyAccepted()
	upgraded := time.Since(started)
	all := append(append([]string{}, forward...), rest...)
	slices.Reverse(all)
	for _, c := range all {
		took = append(took, "back "+u.replace(c, previous))
	}
	u.policyAccepted()
	cancel()
	wg.Wait()

	lost := u.lostImports()
	answers, failed := u.readLoop(looper)
	fmt.Printf("upgrade: forward in %s, %s\n", upgraded.Round(time.Second), strings.Join(took, ", "))
	fmt.Printf("upgrade: edge requests=%d failed=%d (while the edge was replaced: %d) clustersetip requests=%d failed=%d exports-lost=%d imports-withdrawn-or-remade=%d checks-missing-an-exporter=%d\n",
		u.edgeServed.Load()+u.edgeFailed.Load(), u.edgeFailed.Load(), u.edgeFailedWhileDown.Load(), answers, failed, len(lost), len(u.violations), u.partial)
	for _, v := range u.violations {
		t.Error(v)
	}
	for _, l := range lost {
		t.Errorf("lost: %s", l)
	}
	if failed > 0 {
		t.Errorf("%d of %d requests through the ClusterSetIP failed", failed, answers)
	}
	if n := u.edgeFailed.Load() - u.edgeFailedWhileDown.Load(); n > 0 {
		t.Errorf("%d requests through the edge failed while the edge itself was not being replaced", n)
	}
	if answers < 100 {
		t.Errorf("the client pod made %d requests through the ClusterSetIP; the loop did not run", answers)
	}
}

// setUp: echo served in east and west and exported from both, the steady
// Services exported from both, the edge routing to echo, all imported
// everywhere.
func (u *upgrade) setUp() {
	t := u.t
	ctx := context.Background()
	for _, cl := range []string{"east", "west"} {
		serveEcho(t, cl, u.ns, "echo", 1, false)
		if err := kube(t, cl).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: u.ns, Name: "echo"}}); err != nil {
			t.Fatal(err)
		}
		for i := range upgradeSteady {
			u.exportSelectorless(cl, fmt.Sprintf("steady-%d", i))
		}
	}
	u.url = fmt.Sprintf("http://127.0.0.1:%d/", gatewayToEcho(t, u.ns, "upgrade"))
	// An object of fleetnet's own API group, stored by the previous
	// release: served and accepted by every release after.
	policy := &networkingv1alpha1.BackendTrafficPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: u.ns, Name: "echo"},
		Spec: networkingv1alpha1.BackendTrafficPolicySpec{
			TargetRefs: []gwv1.LocalPolicyTargetReference{{Group: mcsv1beta1.GroupName, Kind: "ServiceImport", Name: "echo"}},
			Retry:      &networkingv1alpha1.Retry{Attempts: ptr(int32(1))},
		},
	}
	if err := kube(t, "hub").Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	u.policyAccepted()
	testkit.Eventually(t, 2*time.Minute, "echo and the steady exports imported everywhere, and the edge answering", func(ctx context.Context) error {
		if missing := u.missing(ctx, u.names(), []string{"east", "west"}); len(missing) > 0 {
			return fmt.Errorf("not imported: %v", missing[:min(5, len(missing))])
		}
		return getEcho(upgradeHTTP, u.url)
	})
}

// policyAccepted waits until the BackendTrafficPolicy stored at set-up is
// served with its spec and Accepted by the running gateway.
func (u *upgrade) policyAccepted() {
	testkit.Eventually(u.t, time.Minute, "the BackendTrafficPolicy served and Accepted", func(ctx context.Context) error {
		p := &networkingv1alpha1.BackendTrafficPolicy{}
		if err := kube(u.t, "hub").Get(ctx, client.ObjectKey{Namespace: u.ns, Name: "echo"}, p); err != nil {
			return err
		}
		if r := p.Spec.Retry; r == nil || r.Attempts == nil || *r.Attempts != 1 || len(p.Spec.TargetRefs) != 1 {
			return fmt.Errorf("spec %+v is not what was stored", p.Spec)
		}
		if c := meta.FindStatusCondition(p.Status.Conditions, "Accepted"); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != p.Generation {
			return fmt.Errorf("not Accepted at generation %d: %+v", p.Generation, p.Status.Conditions)
		}
		return nil
	})
}

func (u *upgrade) names() []string {
	out := []string{"echo"}
	for i := range upgradeSteady {
		out = append(out, fmt.Sprintf("steady-%d", i))
	}
	return out
}

// exportSelectorless makes a Service without a selector and its
// ServiceExport in cluster.
func (u *upgrade) exportSelectorless(cluster, name string) {
	ctx := context.Background()
	cl := kube(u.t, cluster)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: u.ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if err := cl.Create(ctx, svc); err != nil {
		u.t.Fatalf("%s: %v", cluster, err)
	}
	if err := cl.Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: u.ns, Name: name}}); err != nil {
		u.t.Fatalf("%s: %v", cluster, err)
	}
}

// missing lists "cluster/name" for each import of names that a cluster
// lacks or that does not list exactly from.
func (u *upgrade) missing(ctx context.Context, names, from []string) []string {
	var out []string
	for _, cl := range clusters {
		for _, name := range names {
			si := &mcsv1beta1.ServiceImport{}
			if err := kube(u.t, cl).Get(ctx, client.ObjectKey{Namespace: u.ns, Name: name}, si); err != nil {
				out = append(out, fmt.Sprintf("%s/%s: %v", cl, name, err))
				continue
			}
			if got := statusClusters(si); !slices.Equal(got, from) {
				out = append(out, fmt.Sprintf("%s/%s from %v", cl, name, got))
			}
		}
	}
	return out
}

func (u *upgrade) clusterSetIP() string {
	var ip string
	testkit.Eventually(u.t, 30*time.Second, "echo's ClusterSetIP in hub", func(ctx context.Context) error {
		si := &mcsv1beta1.ServiceImport{}
		if err := kube(u.t, "hub").Get(ctx, client.ObjectKey{Namespace: u.ns, Name: "echo"}, si); err != nil {
			return err
		}
		for _, a := range si.Spec.IPs {
			if !strings.Contains(a, ":") {
				ip = a
				return nil
			}
		}
		return fmt.Errorf("no IPv4 ClusterSetIP: %v", si.Spec.IPs)
	})
	return ip
}

// replace stops component (SIGTERM, as a rolling update does) and starts
// it again from the binaries in bin, then waits until the fleet has
// converged; it returns "component in duration".
func (u *upgrade) replace(component, bin string) string {
	t := u.t
	start := time.Now()
	isEdge := component == dev.ComponentEdge
	u.replacingEdge.Store(isEdge)
	stop(t, component, false)
	devOptions.Fleetnet = bin
	up(t)
	if isEdge {
		// The edge's window ends once it answers again.
		testkit.Eventually(t, time.Minute, "the edge answering again", func(context.Context) error { return getEcho(upgradeHTTP, u.url) })
		u.mu.Lock()
		u.edgeDown = append(u.edgeDown, [2]time.Time{start, time.Now()})
		u.mu.Unlock()
		u.replacingEdge.Store(false)
	}
	testkit.Eventually(t, 2*time.Minute, "the fleet converged after replacing "+component, func(ctx context.Context) error {
		if missing := u.missing(ctx, u.names(), []string{"east", "west"}); len(missing) > 0 {
			return fmt.Errorf("not imported: %v", missing[:min(5, len(missing))])
		}
		return getEcho(upgradeHTTP, u.url)
	})
	took := time.Since(start).Round(100 * time.Millisecond)
	// The process is the build it should be: this checkout's says its
	// version on /metrics; the previous release's predates the metric.
	want, what := version.Get().Version, "this checkout"
	if bin != fleetnet {
		want, what = "", "the previous release"
	}
	testkit.Eventually(t, 30*time.Second, component+"'s fleetnet_build_info", func(ctx context.Context) error {
		got, err := buildVersion(ctx, state.MetricsAddresses()[component])
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("%s runs version %q, want %q (%s)", component, got, want, what)
		}
		return nil
	})
	fmt.Printf("upgrade: %s %-14s to %s in %s\n", time.Now().Format("15:04:05"), component, what, took)
	return fmt.Sprintf("%s %s", component, took)
}

// buildVersion is the version label of fleetnet_build_info on the
// /metrics at addr, "" when the process exports none.
func buildVersion(ctx context.Context, addr string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "fleetnet_build_info{") {
			continue
		}
		// The label version, not goversion.
		_, rest, ok := strings.Cut(strings.Replace(line, "{", ",", 1), `,version="`)
		if !ok {
			return "", fmt.Errorf("%s: fleetnet_build_info without a version: %s", addr, line)
		}
		v, _, _ := strings.Cut(rest, `"`)
		return v, nil
	}
	return "", sc.Err()
}

// mixedFleetChecks run on a fleet whose registry and hub's and east's
// agents are this checkout's and west's agent the previous release's: the
// registry records each agent's version, and exports of either kind of
// agent are imported by both kinds, and withdrawn from both.
func (u *upgrade) mixedFleetChecks() {
	t := u.t
	this := version.Get().Version
	// West's agent registered with the previous registry, which recorded
	// no version; it is unknown until it registers again.
	u.agentVersions(map[string]string{"hub": this, "east": this, "west": ""})
	ctx := context.Background()
	for _, cl := range []string{"east", "west"} {
		u.exportSelectorless(cl, "mixed-"+cl)
		setEndpoints(t, cl, u.ns, "mixed-"+cl, "http", []string{map[string]string{"east": "192.0.2.10", "west": "192.0.2.20"}[cl]})
	}
	for _, cl := range []string{"east", "west"} {
		want := map[string][]string{cl: {map[string]string{"east": "192.0.2.10", "west": "192.0.2.20"}[cl]}}
		for _, importer := range clusters {
			waitImport(t, importer, u.ns, "mixed-"+cl, want, time.Minute)
		}
	}
	for _, cl := range []string{"east", "west"} {
		if err := kube(t, cl).Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: u.ns, Name: "mixed-" + cl}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, cl := range []string{"east", "west"} {
		for _, importer := range clusters {
			waitNoImport(t, importer, u.ns, "mixed-"+cl, time.Minute)
		}
	}
	fmt.Println("upgrade: mixed fleet (registry and hub's and east's agents new, west's old): exports of old and new agents imported by both and withdrawn from both")
}

// agentVersions waits until the registry lists each cluster's agent at
// want's version.
func (u *upgrade) agentVersions(want map[string]string) {
	testkit.Eventually(u.t, time.Minute, fmt.Sprintf("the registry listing agent versions %v", want), func(ctx context.Context) error {
		rc, conn, err := registryclient.Dial(state.AdminClientOptions())
		if err != nil {
			return err
		}
		defer conn.Close()
		resp, err := rc.ListClusters(ctx, &registryv1.ListClustersRequest{})
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, c := range resp.GetClusters() {
			got[c.GetId()] = c.GetAgentVersion()
		}
		for c, v := range want {
			if got[c] != v {
				return fmt.Errorf("agent versions %v, want %v", got, want)
			}
		}
		return nil
	})
}

var upgradeHTTP = &http.Client{Timeout: 2 * time.Second}

// traffic sends requests through the edge every 20 ms.
func (u *upgrade) traffic(ctx context.Context) {
	for ctx.Err() == nil {
		start := time.Now()
		if err := getEcho(upgradeHTTP, u.url); err != nil {
			u.edgeFailed.Add(1)
			if u.edgeWasDown(start) {
				u.edgeFailedWhileDown.Add(1)
			} else {
				u.violation("a request through the edge failed at %s while the edge ran: %v", start.Format("15:04:05.000"), err)
			}
		} else {
			u.edgeServed.Add(1)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// edgeWasDown reports whether the edge was being replaced at or after
// start (the window of the replacement under way is still open).
func (u *upgrade) edgeWasDown(start time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, w := range u.edgeDown {
		if !start.Before(w[0]) && !start.After(w[1]) {
			return true
		}
	}
	// The window of a replacement under way is recorded when it ends.
	return u.replacingEdge.Load()
}

// check reads every cluster's steady imports each 500 ms: none is ever
// withdrawn or made anew.
func (u *upgrade) check(ctx context.Context) {
	for ctx.Err() == nil {
		for _, cl := range clusters {
			u.checkCluster(ctx, cl)
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (u *upgrade) checkCluster(ctx context.Context, cluster string) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list := &mcsv1beta1.ServiceImportList{}
	if err := kube(u.t, cluster).List(rctx, list, client.InNamespace(u.ns)); err != nil {
		return
	}
	imports := map[string]*mcsv1beta1.ServiceImport{}
	for i := range list.Items {
		imports[list.Items[i].Name] = &list.Items[i]
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, name := range u.names() {
		key := cluster + "/" + name
		si := imports[name]
		before, ok := u.seen[key]
		if si == nil {
			if ok {
				u.violationLocked("%s: the import %s is gone while both its exporters run", cluster, name)
				delete(u.seen, key)
			}
			continue
		}
		now := seenImport{uid: si.UID, ips: slices.Clone(si.Spec.IPs)}
		if ok && (before.uid != now.uid || !slices.Equal(before.ips, now.ips)) {
			u.violationLocked("%s: the import %s was made anew (uid %s → %s, ips %v → %v)", cluster, name, before.uid, now.uid, before.ips, now.ips)
		}
		u.seen[key] = now
		if got := statusClusters(si); !slices.Equal(got, []string{"east", "west"}) {
			u.partial++
		}
	}
}

func (u *upgrade) violation(format string, args ...any) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.violationLocked(format, args...)
}

func (u *upgrade) violationLocked(format string, args ...any) {
	u.violations = append(u.violations, fmt.Sprintf(format, args...))
}

// lostImports lists the steady imports not in place at the end.
func (u *upgrade) lostImports() []string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return u.missing(ctx, u.names(), []string{"east", "west"})
}

// startLoop runs a pod in cluster whose container runs the shell loop,
// and returns the pod's name.
func (u *upgrade) startLoop(cluster, name, loop string) string {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: u.ns, Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: name, Image: "nicolaka/netshoot", Command: []string{"sh", "-c", loop},
		}}},
	}
	if err := kube(u.t, cluster).Create(context.Background(), pod); err != nil {
		u.t.Fatal(err)
	}
	testkit.Eventually(u.t, time.Minute, "the looping pod answering", func(ctx context.Context) error {
		answers, _, err := u.loopLog(ctx, name)
		if err != nil {
			return err
		}
		if answers == 0 {
			return fmt.Errorf("no request yet")
		}
		return nil
	})
	return name
}

// readLoop counts the looping pod's requests and failures.
func (u *upgrade) readLoop(name string) (answers, failed int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	answers, failures, err := u.loopLog(ctx, name)
	if err != nil {
		u.t.Errorf("reading the client pod's log: %v", err)
	}
	for _, f := range failures[:min(5, len(failures))] {
		u.violation("a request through the ClusterSetIP %s", f)
	}
	return answers, len(failures)
}

// loopLog reads the looping pod's log: one line per request, its time in
// milliseconds and its HTTP status (000 for none).
func (u *upgrade) loopLog(ctx context.Context, name string) (answers int, failures []string, err error) {
	cs := kubernetes.NewForConfigOrDie(restConfig(u.t, "hub"))
	rc, err := cs.CoreV1().Pods(u.ns).GetLogs(name, &corev1.PodLogOptions{}).Stream(ctx)
	if err != nil {
		return 0, nil, err
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 {
			continue
		}
		answers++
		if fields[1] != "200" {
			failures = append(failures, fmt.Sprintf("at %s answered %s", fields[0], fields[1]))
		}
	}
	return answers, failures, sc.Err()
}
