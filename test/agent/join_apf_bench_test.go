package agent_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/agent/app"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// apfSeats is the API server's --max-requests-inflight in BenchmarkJoinAPF
// (and half of it mutating): 30 seats for all priority levels, a small or
// busy control plane, where a flood of writes contends for seats.
const apfSeats = 20

// BenchmarkJoinAPF floods a member's API server with a join's writes and
// measures another client's requests meanwhile: the agent, as the agent
// chart's ServiceAccount, imports FLEETNET_JOIN_SERVICES Services (2,000 by
// default) with 16 workers against an API server with API Priority and
// Fairness and 30 seats; a bystander — a controller of the cluster, another
// ServiceAccount — reads and patches a ConfigMap 50 times a second, open
// loop. Three variants, each on a fresh API server: no client-side limit
// (--kube-api-qps 0) without the agent chart's FlowSchema and
// PriorityLevelConfiguration (the agent's writes share the built-in
// workload-low level with the bystander); no limit with them (rendered from
// charts/fleetnet-agent); and the chart's defaults (the FlowSchema and
// --kube-api-qps 200). It
// reports the bystander's p50 and p99 before and during the join, its
// refused (429) requests, and the join's time; with the FlowSchema it
// checks that the API server dispatched the agent's writes through it.
//
//	go test ./test/agent -run '^$' -bench JoinAPF -benchtime 1x -timeout 60m
func BenchmarkJoinAPF(b *testing.B) {
	imports := benchCount(b, "FLEETNET_JOIN_SERVICES", 2000)
	sources, endpoints := 3, 10
	flowControl := renderAgentFlowControl(b)
	agentRole := readClusterRole(b, filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	r := registrytest.Start(b, server.Config{})
	seedRegistry(b, r, imports, sources, endpoints)

	defaults := app.Options{}
	defaults.BindFlags(pflag.NewFlagSet("fleetnet-agent", pflag.ContinueOnError))
	for _, variant := range []struct {
		name       string
		withSchema bool
		qps        float32 // the agent's --kube-api-qps; 0: no limit
	}{
		{"no-flowschema-no-qps-limit", false, 0},
		{"flowschema-no-qps-limit", true, 0},
		{"chart-defaults", true, defaults.KubeAPIQPS},
	} {
		name, withSchema := variant.name, variant.withSchema
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				f := fleet.Start(b, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "joining", PriorityAndFairness: true, MaxRequestsInflight: apfSeats}}})
				c := f.Cluster(b, "joining")
				wc := c.Client(b)
				createNamespace(b, wc, ns)
				if withSchema {
					for _, obj := range flowControl {
						if err := wc.Create(b.Context(), obj.DeepCopy()); err != nil {
							b.Fatalf("creating the chart's %s %s: %v", obj.GetKind(), obj.GetName(), err)
						}
					}
				}
				agentCfg := c.AsServiceAccount(b, "fleetnet-system", "fleetnet-agent", agentRole.DeepCopy())
				by := startBystander(b, c)
				time.Sleep(10 * time.Second) // the bystander's baseline: a time window, not a condition
				before := by.window()

				start := time.Now()
				a := startAgentAs(b, agentCfg, r, "joining", func(o *app.Options) {
					o.KubeAPIQPS, o.KubeAPIBurst, o.ImportWorkers = variant.qps, defaults.KubeAPIBurst, 16
				})
				testkit.Eventually(b, 30*time.Minute, "every import in place", func(context.Context) error {
					if in := a.gauge(b, "fleetnet_agent_imports_in_place", nil); in != float64(imports) {
						return fmt.Errorf("%g of %d imports in place", in, imports)
					}
					return nil
				})
				joined := time.Since(start)
				during := by.window()
				a.stop()
				by.stop()

				dispatched := fleet.MetricSum(fleet.APIServerMetrics(b, c.Name, c.Config)["apiserver_flowcontrol_dispatched_requests_total"], map[string]string{"flow_schema": "fleetnet-agent"})
				if withSchema && dispatched == 0 {
					b.Errorf("no request of the agent dispatched by the FlowSchema fleetnet-agent")
				}
				b.Logf("%s: %d imports joined in %s; bystander before: %s; during: %s; agent requests through the FlowSchema fleetnet-agent: %.0f",
					name, imports, joined.Round(time.Second), before, during, dispatched)
				b.ReportMetric(joined.Seconds(), "join-s")
				b.ReportMetric(before.quantile(0.99), "bystander-before-p99-ms")
				b.ReportMetric(during.quantile(0.5), "bystander-join-p50-ms")
				b.ReportMetric(during.quantile(0.99), "bystander-join-p99-ms")
				b.ReportMetric(float64(during.refused), "bystander-429s")
			}
		})
	}
}

// renderAgentFlowControl renders the agent chart's PriorityLevelConfiguration
// and FlowSchema for the release fleetnet-agent in fleetnet-system.
func renderAgentFlowControl(b *testing.B) []*unstructured.Unstructured {
	h := testkit.NewHelm(b)
	out := h.Must(b, "template", "fleetnet-agent", filepath.Join("..", "..", "charts", "fleetnet-agent"), "--namespace", "fleetnet-system",
		"--show-only", "templates/flowcontrol.yaml",
		"--set", "identity.clusterID=joining,identity.clustersetID=fleet,registry.address=registry:7443")
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			b.Fatal(err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	if len(objs) != 2 {
		b.Fatalf("the agent chart's flowcontrol.yaml rendered %d objects, want a PriorityLevelConfiguration and a FlowSchema:\n%s", len(objs), out)
	}
	return objs
}

func readClusterRole(b *testing.B, path string) *rbacv1.ClusterRole {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		b.Fatalf("%s: %v", path, err)
	}
	return role
}

// bystander is a controller of the member cluster: 50 requests a second,
// open loop (a slow answer does not delay the next request), alternately a
// read and a patch of one ConfigMap, each request's latency recorded.
type bystander struct {
	mu        sync.Mutex
	latencies []time.Duration
	refused   int
	failed    error
	stop      func()
}

// latencyWindow is what the bystander saw in a window.
type latencyWindow struct {
	latencies []time.Duration
	refused   int
}

func (w latencyWindow) quantile(q float64) float64 {
	if len(w.latencies) == 0 {
		return 0
	}
	s := slices.Clone(w.latencies)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds()) / 1000
}

func (w latencyWindow) String() string {
	return fmt.Sprintf("%d requests, p50 %.1f ms, p99 %.1f ms, %d refused (429)", len(w.latencies), w.quantile(0.5), w.quantile(0.99), w.refused)
}

func startBystander(b *testing.B, c *fleet.Cluster) *bystander {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "bystander"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "patch"}}},
	}
	cfg := c.AsServiceAccount(b, "bystander", "controller", role)
	cfg.QPS = -1
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "bystander", Name: "state"}}
	if err := c.Client(b).Create(b.Context(), cm); err != nil {
		b.Fatal(err)
	}
	by := &bystander{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			wg.Go(func() {
				rctx, rcancel := context.WithTimeout(ctx, time.Minute)
				defer rcancel()
				began := time.Now()
				var err error
				if i%2 == 0 {
					_, err = cs.CoreV1().ConfigMaps("bystander").Get(rctx, "state", metav1.GetOptions{})
				} else {
					patch := fmt.Appendf(nil, `{"data":{"n":"%d"}}`, i)
					_, err = cs.CoreV1().ConfigMaps("bystander").Patch(rctx, "state", types.MergePatchType, patch, metav1.PatchOptions{})
				}
				took := time.Since(began)
				by.mu.Lock()
				defer by.mu.Unlock()
				switch {
				case err == nil:
					by.latencies = append(by.latencies, took)
				case apierrors.IsTooManyRequests(err):
					by.refused++
				case ctx.Err() == nil:
					by.failed = err
				}
			})
		}
	})
	stopped := false
	by.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		wg.Wait()
		if by.failed != nil {
			b.Errorf("the bystander's request failed: %v", by.failed)
		}
	}
	b.Cleanup(by.stop)
	return by
}

// window returns what the bystander saw since the last window.
func (by *bystander) window() latencyWindow {
	by.mu.Lock()
	defer by.mu.Unlock()
	w := latencyWindow{latencies: by.latencies, refused: by.refused}
	by.latencies, by.refused = nil, 0
	return w
}
