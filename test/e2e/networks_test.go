//go:build networks

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/dev"
	"github.com/fleetnet/fleetnet/internal/eastwest/tunnel"
	"github.com/fleetnet/fleetnet/internal/testkit"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// `make test-eastwest` runs this file: west on a network of its own, whose
// pod range is east's (10.244.1.0/24 in both), hub and east on the
// default network.
func init() {
	networks = map[string]string{"west": "b"}
}

// TestEastWestOverlappingNetworks: echo in east (1 pod) and west (3 pods),
// exported by both. Hub's client reaches it by name through hub's
// east-west gateway, which dials east's pod and reaches west's through
// west's gateway; hub's slices name hub's gateway alone; a west pod's
// address dialled from hub reaches no west pod; west's gateway refuses a
// cluster outside an export's scope, whatever its certificate; with west's
// gateway killed, new connections go to east; a withdrawn export is
// refused at west's gateway.
func TestEastWestOverlappingNetworks(t *testing.T) {
	if err := dev.NodeRequirements(); err != nil {
		t.Fatalf("%v (the e2e suite runs as root in CI)", err)
	}
	ns := namespace(t, "e2e-eastwest")
	ctx := context.Background()
	serveEcho(t, "east", ns, "echo", 1, false)
	serveEcho(t, "west", ns, "echo", 3, false)
	runPod(t, "hub", ns, "client")
	for _, c := range []string{"east", "west"} {
		if err := kube(t, c).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}}); err != nil {
			t.Fatal(err)
		}
	}
	// An export scoped to east alone: hub may not reach it.
	serveEcho(t, "west", ns, "scoped", 1, false)
	if err := kube(t, "west").Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scoped",
		Annotations: map[string]string{keys.AnnotationExportTo: "east"}}}); err != nil {
		t.Fatal(err)
	}
	echoPods := appPods(t, ns, "echo")
	hub := kube(t, "hub")
	si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}}
	testkit.Eventually(t, time.Minute, "hub's import of echo from east and west, through its east-west gateway", func(ctx context.Context) error {
		if err := hub.Get(ctx, ctrlclient.ObjectKeyFromObject(si), si); err != nil {
			return err
		}
		if len(statusClusters(si)) != 2 || len(si.Spec.IPs) == 0 {
			return fmt.Errorf("clusters %v, ips %v", statusClusters(si), si.Spec.IPs)
		}
		return nil
	})
	waitCondition(t, "hub", si, keys.ConditionNetworks, metav1.ConditionTrue, keys.ReasonThroughEastWestGateway)

	// Hub's slices name its gateway alone, never a pod of west's network.
	slices_ := &discoveryv1.EndpointSliceList{}
	if err := hub.List(ctx, slices_, ctrlclient.InNamespace(ns), ctrlclient.MatchingLabels{mcsv1beta1.LabelServiceName: "echo"}); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, s := range slices_.Items {
		for _, e := range s.Endpoints {
			addrs = append(addrs, e.Addresses...)
		}
	}
	if !slices.Equal(slices.Compact(slices.Sorted(slices.Values(addrs))), []string{"10.244.255.1"}) {
		t.Fatalf("hub's slices of echo hold %v, want hub's east-west gateway (10.244.255.1) alone", addrs)
	}

	name := fmt.Sprintf("http://echo.%s.svc.%s/", ns, keys.ClustersetZone)
	// answers runs n requests, each a new connection, from hub's client
	// and counts the answers by cluster ("": failed).
	var answersOnce func(ctx context.Context, n int, url string) (map[string]int, error)
	answers := func(ctx context.Context, n int, url string) (map[string]int, error) {
		// In runs of at most 200: an exec lasts at most 30 s.
		seen := map[string]int{}
		for n > 0 {
			part, err := answersOnce(ctx, min(n, 200), url)
			if err != nil {
				return nil, err
			}
			for c, k := range part {
				seen[c] += k
			}
			n -= min(n, 200)
		}
		return seen, nil
	}
	answersOnce = func(ctx context.Context, n int, url string) (map[string]int, error) {
		script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do curl -sS --max-time 2 %s 2>&1 | tr -d '\n'; echo; i=$((i+1)); done`, n, url)
		ctx, cancel := context.WithTimeout(ctx, 29*time.Second)
		defer cancel()
		out, errOut, err := execIn(ctx, t, "hub", ns, "client", "client", false, "sh", "-c", script)
		if err != nil {
			return nil, fmt.Errorf("curl in the client pod: %w: %s", err, errOut)
		}
		seen := map[string]int{}
		for line := range strings.Lines(out) {
			c := ""
			if e, err := parseEcho([]byte(strings.TrimSpace(line))); err == nil {
				c = echoPods[e.Pod].cluster
			} else if seen[""] == 0 {
				t.Logf("a failed request: %s", strings.TrimSpace(line))
			}
			seen[c]++
		}
		return seen, nil
	}
	// Every connection by name is answered, each cluster's share its
	// ready endpoints' (west 3 of 4) within 10 %.
	testkit.Eventually(t, time.Minute, "20 connections by name from hub answered", func(ctx context.Context) error {
		seen, err := answers(ctx, 20, name)
		if err == nil && seen["east"]+seen["west"] != 20 {
			err = fmt.Errorf("answers by cluster (\"\": failed) %v", seen)
		}
		return err
	})
	testkit.Eventually(t, 5*time.Minute, "1,000 connections by name from hub, shared by ready endpoints", func(ctx context.Context) error {
		started := time.Now()
		seen, err := answers(ctx, 1000, name)
		t.Logf("1,000 connections took %s", time.Since(started).Round(time.Millisecond))
		if err != nil {
			return err
		}
		total := seen["east"] + seen["west"]
		if seen[""] > 0 || total != 1000 {
			return fmt.Errorf("answers by cluster (\"\": failed) %v", seen)
		}
		share := float64(seen["west"]) / float64(total)
		t.Logf("1,000 connections from hub by name: %v; west's share %.3f (3 of 4 ready endpoints: 0.75)", seen, share)
		if math.Abs(share-0.75) > 0.075 {
			return fmt.Errorf("west's share %.3f of %v, want 0.75 ± 10 %%", share, seen)
		}
		return nil
	})

	// A west pod's address, dialled from hub, reaches no west pod: the
	// networks do not route to each other's pods (an address that is no
	// pod of hub's network answers nothing).
	var westOnly string
	taken := map[string]bool{}
	for _, p := range echoPods {
		if p.cluster != "west" {
			taken[p.pod.Status.PodIP] = true
		}
	}
	for _, p := range echoPods {
		if p.cluster == "west" && !taken[p.pod.Status.PodIP] {
			westOnly = p.pod.Status.PodIP
		}
	}
	if westOnly == "" {
		t.Fatalf("every west pod's address is also a pod's of hub's network: %v", echoPods)
	}
	if seen, err := answers(ctx, 1, "http://"+westOnly+":8080/"); err != nil || seen[""] != 1 {
		t.Fatalf("hub's client dialled west pod %s directly: %v %v, want no answer", westOnly, seen, err)
	}

	// West's gateway refuses hub's stream to the export scoped to east,
	// though hub presents a valid cluster certificate.
	westCluster, err := state.Cluster("west")
	if err != nil {
		t.Fatal(err)
	}
	peer := tunnel.Peer{Cluster: "west", Address: state.EastWestAddress(westCluster)}
	dialer := &tunnel.Dialer{Credentials: hubGatewayCredentials(t)}
	t.Cleanup(func() { dialer.Close() })
	refused := func(ctx context.Context, svc string) (*tunnel.RefusedError, error) {
		s, err := dialer.Dial(ctx, peer, tunnel.Target{Namespace: ns, Name: svc, Port: 80})
		if err == nil {
			s.Close()
			return nil, nil
		}
		var r *tunnel.RefusedError
		if errors.As(err, &r) {
			return r, nil
		}
		return nil, err
	}
	r, err := refused(ctx, "scoped")
	if err != nil || r == nil || r.Status != http.StatusNotFound || !strings.Contains(r.Message, "not exported to cluster hub") {
		t.Fatalf("hub's stream to west's scoped export: %v %v, want 404 not exported to cluster hub", r, err)
	}
	if got := westMetric(t, westCluster, `fleetnet_eastwest_streams_refused_total{reason="out_of_scope"}`); got < 1 {
		t.Errorf("west's gateway counted %v out-of-scope refusals, want at least 1", got)
	}
	if got := westMetric(t, westCluster, fmt.Sprintf(`fleetnet_eastwest_streams_total{peer="hub",service="%s/echo"}`, ns)); got < 500 {
		t.Errorf("west's gateway counted %v streams of hub to echo, want its share of the 1,000 connections", got)
	}

	// West's gateway killed: new connections go to east.
	stop(t, "west/"+dev.PartEastWestGateway, true)
	killed := time.Now()
	// The first connections after the kill: hub's gateway finds west's
	// gone (a refused connection ejects it) and tries east instead.
	if seen, err := answers(ctx, 100, name); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("west's gateway killed: the next 100 connections by cluster (\"\": failed) %v, in %s", seen, time.Since(killed).Round(time.Millisecond))
	}
	testkit.Eventually(t, 30*time.Second, "connections answered by east alone with west's gateway down", func(ctx context.Context) error {
		seen, err := answers(ctx, 50, name)
		if err != nil {
			return err
		}
		if seen["east"] != 50 {
			return fmt.Errorf("answers by cluster (\"\": failed) %v", seen)
		}
		return nil
	})
	t.Logf("west's gateway killed: east alone answered 50 connections in a row %s later", time.Since(killed).Round(time.Millisecond))
	up(t)
	testkit.Eventually(t, time.Minute, "west answers again once its gateway is back", func(ctx context.Context) error {
		seen, err := answers(ctx, 40, name)
		if err != nil {
			return err
		}
		if seen["west"] == 0 || seen[""] > 0 {
			return fmt.Errorf("answers by cluster (\"\": failed) %v", seen)
		}
		return nil
	})

	// West withdraws echo: its gateway refuses streams to it.
	if r, err := refused(ctx, "echo"); err != nil || r != nil {
		t.Fatalf("hub's stream to west's echo before the withdrawal: %v %v", r, err)
	}
	if err := kube(t, "west").Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}}); err != nil {
		t.Fatal(err)
	}
	withdrawn := time.Now()
	testkit.Eventually(t, 10*time.Second, "west's gateway refusing streams to the withdrawn export", func(ctx context.Context) error {
		r, err := refused(ctx, "echo")
		if err != nil {
			return err
		}
		if r == nil || r.Status != http.StatusNotFound {
			return fmt.Errorf("stream to echo: %v", r)
		}
		return nil
	})
	t.Logf("west withdrew echo: its gateway refused streams to it %s later", time.Since(withdrawn).Round(time.Millisecond))
}

// hubGatewayCredentials are hub's east-west gateway identity, from the
// fleet's certificates.
func hubGatewayCredentials(t *testing.T) tunnel.Credentials {
	t.Helper()
	dir := state.CertDir()
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "hub-eastwest.crt"), filepath.Join(dir, "hub-eastwest.key"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return tunnel.StaticCredentials{Cert: &cert, Pool: pool}
}

// westMetric reads one sample of west's gateway's metrics (0 when absent).
func westMetric(t *testing.T, west dev.ClusterState, sample string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + state.EastWestMetricsAddress(west) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), sample+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}
