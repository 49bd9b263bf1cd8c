package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/dev"
	"github.com/fleetnet/fleetnet/internal/testkit"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// TestClusterSetIPLocality: echo runs in hub (2 pods), east and west (1
// each), exported by all three. With a BackendTrafficPolicy of locality
// LocalFirst and failover to east in hub, hub's agent hints the imported
// slices for hub's zone and hub's kube-proxy sends a hub pod's requests to
// the ClusterSetIP to hub's pods only. Hub's echo scaled to 0: east alone
// answers; how long after the scale-down others still answered or
// requests failed is reported. Scaled back: traffic returns to hub.
func TestClusterSetIPLocality(t *testing.T) {
	if err := dev.NodeRequirements(); err != nil {
		t.Fatalf("%v (the e2e suite runs as root in CI)", err)
	}
	ns := namespace(t, "e2e-locality")
	ctx := context.Background()
	serveEcho(t, "hub", ns, "echo", 2, false)
	serveEcho(t, "east", ns, "echo", 1, false)
	serveEcho(t, "west", ns, "echo", 1, false)
	runPod(t, "hub", ns, "client")
	for _, c := range []string{"hub", "east", "west"} {
		se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}}
		if err := kube(t, c).Create(ctx, se); err != nil {
			t.Fatal(err)
		}
	}
	echoPods := appPods(t, ns, "echo")
	hub := kube(t, "hub")
	policy := &networkingv1alpha1.BackendTrafficPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "local-first"},
		Spec: networkingv1alpha1.BackendTrafficPolicySpec{
			TargetRefs: []gwv1.LocalPolicyTargetReference{{Group: mcsv1beta1.GroupName, Kind: "ServiceImport", Name: "echo"}},
			Locality:   networkingv1alpha1.LocalityLocalFirst,
			Failover:   &networkingv1alpha1.Failover{Order: []networkingv1alpha1.FailoverTarget{{Cluster: "east"}}},
		},
	}
	if err := hub.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}}
	testkit.Eventually(t, time.Minute, "hub's import of echo from three clusters, with its ClusterSetIP", func(ctx context.Context) error {
		if err := hub.Get(ctx, ctrlclient.ObjectKeyFromObject(si), si); err != nil {
			return err
		}
		if len(statusClusters(si)) != 3 || len(si.Spec.IPs) == 0 {
			return fmt.Errorf("clusters %v, ips %v", statusClusters(si), si.Spec.IPs)
		}
		return nil
	})
	url := "http://" + net.JoinHostPort(si.Spec.IPs[0], "80") + "/"

	type answer struct {
		at      time.Time
		cluster string // "" when the request failed
	}
	// requests runs curl in the client pod every 50 ms for the given time
	// and returns when each answer came and from which cluster.
	requests := func(ctx context.Context, d time.Duration) ([]answer, error) {
		script := fmt.Sprintf(`end=$(($(date +%%s) + %d)); while [ $(date +%%s) -lt $end ]; do
  r=$(curl -sS --max-time 1 %s 2>/dev/null | tr -d '\n'); echo "$(date +%%s%%3N) $r"; sleep 0.05; done`, int(d.Seconds()), url)
		// Bounded by the script's own time, well inside execIn's 30 s: an
		// exec that stalls (seen once under load) is retried by the
		// callers' polling rather than eating their whole minute.
		ctx, cancel := context.WithTimeout(ctx, d+8*time.Second)
		defer cancel()
		out, errOut, err := execIn(ctx, t, "hub", ns, "client", "client", false, "sh", "-c", script)
		if err != nil {
			return nil, fmt.Errorf("curl in the client pod: %w: %s", err, errOut)
		}
		var answers []answer
		for line := range strings.Lines(out) {
			ms, body, _ := strings.Cut(strings.TrimSpace(line), " ")
			at, err := strconv.ParseInt(ms, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("line %q: %w", line, err)
			}
			a := answer{at: time.UnixMilli(at)}
			if e, err := parseEcho([]byte(body)); err == nil {
				p, ok := echoPods[e.Pod]
				if !ok {
					return nil, fmt.Errorf("answer from pod %q, no echo pod of the fleet", e.Pod)
				}
				a.cluster = p.cluster
			}
			answers = append(answers, a)
		}
		return answers, nil
	}
	onlyFrom := func(what string, want ...string) {
		t.Helper()
		testkit.Eventually(t, time.Minute, what, func(ctx context.Context) error {
			answers, err := requests(ctx, 2*time.Second)
			if err != nil {
				return err
			}
			seen := map[string]int{}
			for _, a := range answers {
				seen[a.cluster]++
			}
			for c := range seen {
				if !strings.Contains(" "+strings.Join(want, " ")+" ", " "+c+" ") {
					return fmt.Errorf("answers by cluster (\"\": failed) %v, want only %v; %s", seen, want, explainLocality(ctx, hub, ns))
				}
			}
			if len(answers) < 5 {
				return fmt.Errorf("%d answers in 2 s", len(answers))
			}
			return nil
		})
	}
	onlyFrom("hub's client answered by hub's pods only", "hub")
	waitCondition(t, "hub", si, keys.ConditionLocality, metav1.ConditionTrue, keys.ReasonLocalCluster)

	// Hub's pods stop while the client keeps asking.
	type result struct {
		answers []answer
		err     error
	}
	done := make(chan result, 1)
	go func() {
		a, err := requests(ctx, 12*time.Second)
		done <- result{a, err}
	}()
	time.Sleep(2 * time.Second) // requests answered by hub before the stop
	stopped := time.Now()
	scaleEcho(t, ns, 0)
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	// Until hub's agent re-hints the slices, kube-proxy sees hub's hinted
	// endpoints not ready and ignores the hints (every cluster).
	settled := stopped
	byCluster := map[string]int{}
	for _, a := range res.answers {
		if a.at.Before(stopped) {
			continue
		}
		byCluster[a.cluster]++
		if a.cluster != "east" && a.at.After(settled) {
			settled = a.at
		}
	}
	t.Logf("hub's echo scaled to 0: requests after it by cluster (\"\": failed) %v; east alone answered from %s after the scale-down on",
		byCluster, settled.Sub(stopped).Round(time.Millisecond))
	onlyFrom("with hub's pods gone, east answers (the failover order)", "east")
	waitCondition(t, "hub", si, keys.ConditionLocality, metav1.ConditionTrue, keys.ReasonFailedOver)

	scaleEcho(t, ns, 2)
	ready := time.Now()
	echoPods = appPods(t, ns, "echo") // hub's new pods
	onlyFrom("hub's pods back: the traffic returns to hub", "hub")
	t.Logf("hub's pods ready again: only hub answered a 2-second sample of requests that ended %s later", time.Since(ready).Round(time.Millisecond))
}

// scaleEcho sets the replicas of hub's echo Deployment.
func scaleEcho(t *testing.T, ns string, replicas int32) {
	t.Helper()
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}}
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
	if err := kube(t, "hub").Patch(context.Background(), dep, ctrlclient.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	if replicas == 0 {
		return
	}
	testkit.Eventually(t, time.Minute, fmt.Sprintf("%d echo pods ready in hub", replicas), func(ctx context.Context) error {
		if err := kube(t, "hub").Get(ctx, ctrlclient.ObjectKeyFromObject(dep), dep); err != nil {
			return err
		}
		if dep.Status.ReadyReplicas != replicas {
			return fmt.Errorf("%d of %d ready", dep.Status.ReadyReplicas, replicas)
		}
		return nil
	})
}

// explainLocality describes what hub's kube-proxy routes by, for a failed
// wait: hub's imported slices endpoint by endpoint (cluster, address,
// ready, zone hints), its nodes' zones, and the end of its kube-proxy's
// log.
func explainLocality(ctx context.Context, hub ctrlclient.Client, ns string) string {
	var b strings.Builder
	var slices discoveryv1.EndpointSliceList
	if err := hub.List(ctx, &slices, ctrlclient.InNamespace(ns), ctrlclient.MatchingLabels{mcsv1beta1.LabelServiceName: "echo"}); err != nil {
		fmt.Fprintf(&b, "listing hub's imported slices: %v", err)
	}
	b.WriteString("hub's imported slices:")
	for _, sl := range slices.Items {
		for _, ep := range sl.Endpoints {
			var zones []string
			if ep.Hints != nil {
				for _, z := range ep.Hints.ForZones {
					zones = append(zones, z.Name)
				}
			}
			fmt.Fprintf(&b, " [%s %v ready=%v zones=%v]", sl.Labels[mcsv1beta1.LabelSourceCluster], ep.Addresses, ep.Conditions.Ready != nil && *ep.Conditions.Ready, zones)
		}
	}
	var nodes corev1.NodeList
	if err := hub.List(ctx, &nodes); err == nil {
		b.WriteString("; hub's nodes:")
		for _, n := range nodes.Items {
			fmt.Fprintf(&b, " %s zone=%s", n.Name, n.Labels[corev1.LabelTopologyZone])
		}
	}
	if cs, err := state.Cluster("hub"); err == nil {
		// What kube-proxy made of it: its rules for the namespace (the
		// service chain's numgen vmap lists the endpoints it uses) and
		// its sync counters.
		out, err := exec.CommandContext(ctx, "ip", "netns", "exec", cs.NodeNetNS(), "nft", "list", "ruleset").CombinedOutput()
		fmt.Fprintf(&b, "; hub's kube-proxy rules naming %s (%v):\n", ns, err)
		for line := range strings.Lines(string(out)) {
			if strings.Contains(line, ns) {
				b.WriteString(line)
			}
		}
		out, err = exec.CommandContext(ctx, "ip", "netns", "exec", cs.NodeNetNS(), "curl", "-sS", "--max-time", "2", "http://127.0.0.1:10249/metrics").CombinedOutput()
		fmt.Fprintf(&b, "hub's kube-proxy syncs (%v):\n", err)
		for line := range strings.Lines(string(out)) {
			if strings.HasPrefix(line, "kubeproxy_sync_proxy_rules_last_timestamp_seconds") || strings.HasPrefix(line, "kubeproxy_sync_full_proxy_rules_duration_seconds_count") ||
				strings.HasPrefix(line, "kubeproxy_sync_partial_proxy_rules_duration_seconds_count") || strings.HasPrefix(line, "kubeproxy_sync_proxy_rules_nftables_") {
				b.WriteString(line)
			}
		}
	}
	// Anything of an earlier fleet would show here beside this fleet's.
	if out, err := exec.CommandContext(ctx, "ip", "netns", "list").CombinedOutput(); err == nil {
		fmt.Fprintf(&b, "network namespaces on the machine: %s\n", strings.Join(strings.Fields(string(out)), " "))
	}
	if p, ok := state.Processes["hub/"+dev.PartKubeProxy]; ok {
		fmt.Fprintf(&b, "hub's kube-proxy log ends:\n%s", controlplane.Tail(p.Log, 30))
	}
	return b.String()
}
