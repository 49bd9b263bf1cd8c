package gateway_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	"github.com/fleetnet/fleetnet/internal/testkit"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func importTarget(name string) gwv1.LocalPolicyTargetReference {
	return gwv1.LocalPolicyTargetReference{Group: mcsv1beta1.GroupName, Kind: "ServiceImport", Name: gwv1.ObjectName(name)}
}

// The API server refuses what the CRD's schema can check, naming the
// field, and fills in the defaults.
func TestBackendTrafficPolicyValidation(t *testing.T) {
	c := startHub(t).Client(t)
	ctx := t.Context()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	valid := func() networkingv1alpha1.BackendTrafficPolicySpec {
		return networkingv1alpha1.BackendTrafficPolicySpec{TargetRefs: []gwv1.LocalPolicyTargetReference{importTarget("echo")}}
	}
	httpCheck := func(path string) *networkingv1alpha1.HealthCheck {
		return &networkingv1alpha1.HealthCheck{Type: networkingv1alpha1.HealthCheckHTTP, HTTP: &networkingv1alpha1.HTTPHealthCheck{Path: path}}
	}
	tests := []struct {
		name string
		edit func(*networkingv1alpha1.BackendTrafficPolicySpec)
		want []string // in the API server's error
	}{
		{"no target", func(s *networkingv1alpha1.BackendTrafficPolicySpec) { s.TargetRefs = nil }, []string{"spec.targetRefs"}},
		{"target kind", func(s *networkingv1alpha1.BackendTrafficPolicySpec) {
			s.TargetRefs = []gwv1.LocalPolicyTargetReference{{Group: "apps", Kind: "Deployment", Name: "echo"}}
		}, []string{"spec.targetRefs", "each targetRef must be a Service"}},
		{"target twice", func(s *networkingv1alpha1.BackendTrafficPolicySpec) {
			s.TargetRefs = append(s.TargetRefs, importTarget("echo"))
		}, []string{"spec.targetRefs", "targetRefs must be unique"}},
		{"http without request", func(s *networkingv1alpha1.BackendTrafficPolicySpec) {
			s.HealthCheck = &networkingv1alpha1.HealthCheck{Type: networkingv1alpha1.HealthCheckHTTP}
		}, []string{"spec.healthCheck", "http is required when type is HTTP"}},
		{"relative path", func(s *networkingv1alpha1.BackendTrafficPolicySpec) { s.HealthCheck = httpCheck("healthz") },
			[]string{"spec.healthCheck.http.path"}},
		{"timeout not shorter", func(s *networkingv1alpha1.BackendTrafficPolicySpec) {
			s.HealthCheck = httpCheck("/healthz")
			s.HealthCheck.Interval, s.HealthCheck.Timeout = "1s", "1s"
		}, []string{"spec.healthCheck", "timeout must be shorter than interval"}},
		{"interval too short", func(s *networkingv1alpha1.BackendTrafficPolicySpec) {
			s.HealthCheck = &networkingv1alpha1.HealthCheck{Interval: "50ms", Timeout: "10ms"}
		}, []string{"spec.healthCheck.interval", "interval must be from 100ms to 5m"}},
		{"threshold", func(s *networkingv1alpha1.BackendTrafficPolicySpec) {
			s.HealthCheck = &networkingv1alpha1.HealthCheck{UnhealthyThreshold: 11}
		}, []string{"spec.healthCheck.unhealthyThreshold"}},
		{"attempts", func(s *networkingv1alpha1.BackendTrafficPolicySpec) {
			s.Retry = &networkingv1alpha1.Retry{Attempts: ptr.To[int32](9)}
		}, []string{"spec.retry.attempts"}},
		{"codes", func(s *networkingv1alpha1.BackendTrafficPolicySpec) {
			s.Retry = &networkingv1alpha1.Retry{Codes: []int32{503, 200}}
		}, []string{"spec.retry.codes[1]"}},
		{"connect timeout", func(s *networkingv1alpha1.BackendTrafficPolicySpec) {
			s.Timeouts = &networkingv1alpha1.Timeouts{Connect: "2m"}
		}, []string{"spec.timeouts.connect", "connect must be from 10ms to 1m"}},
		{"locality", func(s *networkingv1alpha1.BackendTrafficPolicySpec) { s.Locality = "Nearest" },
			[]string{"spec.locality", "Nearest"}},
		{"failover without LocalFirst", func(s *networkingv1alpha1.BackendTrafficPolicySpec) {
			s.Failover = &networkingv1alpha1.Failover{Order: []networkingv1alpha1.FailoverTarget{{Region: "us"}}}
		}, []string{"spec", "failover needs locality LocalFirst"}},
		{"failover step with region and cluster", func(s *networkingv1alpha1.BackendTrafficPolicySpec) {
			s.Locality = networkingv1alpha1.LocalityLocalFirst
			s.Failover = &networkingv1alpha1.Failover{Order: []networkingv1alpha1.FailoverTarget{{Region: "us"}, {Region: "eu", Cluster: "west"}}}
		}, []string{"spec.failover.order[1]", "exactly one of region and cluster must be set"}},
		{"failover step without either", func(s *networkingv1alpha1.BackendTrafficPolicySpec) {
			s.Locality = networkingv1alpha1.LocalityLocalFirst
			s.Failover = &networkingv1alpha1.Failover{Order: []networkingv1alpha1.FailoverTarget{{}}}
		}, []string{"spec.failover.order[0]", "exactly one of region and cluster must be set"}},
		{"failover region not a label value", func(s *networkingv1alpha1.BackendTrafficPolicySpec) {
			s.Locality = networkingv1alpha1.LocalityLocalFirst
			s.Failover = &networkingv1alpha1.Failover{Order: []networkingv1alpha1.FailoverTarget{{Region: "us east"}}}
		}, []string{"spec.failover.order[0].region", "us east"}},
		{"failover threshold", func(s *networkingv1alpha1.BackendTrafficPolicySpec) {
			s.Locality = networkingv1alpha1.LocalityLocalFirst
			s.Failover = &networkingv1alpha1.Failover{MinReadyEndpoints: 1001}
		}, []string{"spec.failover.minReadyEndpoints"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := valid()
			tt.edit(&spec)
			p := &networkingv1alpha1.BackendTrafficPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("bad-%d", i)}, Spec: spec}
			err := c.Create(ctx, p)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("Create = %v, want Invalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}

	p := &networkingv1alpha1.BackendTrafficPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "defaults"}, Spec: valid()}
	p.Spec.HealthCheck = &networkingv1alpha1.HealthCheck{}
	p.Spec.Retry = &networkingv1alpha1.Retry{}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	hc := p.Spec.HealthCheck
	if hc.Type != networkingv1alpha1.HealthCheckTCP || hc.Interval != "500ms" || hc.Timeout != "300ms" || hc.HealthyThreshold != 1 || hc.UnhealthyThreshold != 2 ||
		p.Spec.Locality != networkingv1alpha1.LocalityWeighted || p.Spec.Retry.Attempts == nil || *p.Spec.Retry.Attempts != 1 {
		t.Errorf("defaults not filled in: %+v, retry %+v, locality %q", *hc, *p.Spec.Retry, p.Spec.Locality)
	}
}

// checkedBackend answers every request with its name, and /healthz with
// healthz (200 or 503).
func checkedBackend(t *testing.T, name string, healthz int) (string, int32) {
	t.Helper()
	l, err := net.Listen("tcp", backendAddress+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.WriteHeader(healthz)
			return
		}
		fmt.Fprint(w, name)
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	host, port, _ := net.SplitHostPort(l.Addr().String())
	p, _ := strconv.Atoi(port)
	return host, int32(p)
}

// A policy's status follows policy attachment (Accepted with the
// Gateway as ancestor; Conflicted for a newer policy on the same backend;
// TargetNotFound), and its HTTP health check reaches the edge: a cluster
// whose /healthz fails gets no traffic, although its port accepts.
func TestBackendTrafficPolicyReachesTheEdge(t *testing.T) {
	localAddress(t)
	hub := startHub(t)
	c := hub.Client(t)
	ctx := t.Context()
	listen := startGatewayAndEdge(t, hub)

	eastHost, eastPort := checkedBackend(t, "east", http.StatusOK)
	westHost, westPort := checkedBackend(t, "west", http.StatusServiceUnavailable)
	create(t, c, echoGateway(listen, importedSlice("echo-east", "east", eastHost, eastPort), importedSlice("echo-west", "west", westHost, westPort))...)
	create(t, c, echoRoute())
	// Without a policy, the TCP check passes everywhere: both clusters
	// answer.
	answers := func(want ...string) func(context.Context) error {
		return func(context.Context) error {
			seen := map[string]int{}
			for range 40 {
				body, code, err := get(listen)
				if err != nil || code != http.StatusOK {
					return fmt.Errorf("GET: %d %q %v", code, body, err)
				}
				seen[body]++
			}
			if len(seen) != len(want) {
				return fmt.Errorf("answers %v, want only %v", seen, want)
			}
			for _, w := range want {
				if seen[w] == 0 {
					return fmt.Errorf("answers %v, want %v", seen, want)
				}
			}
			return nil
		}
	}
	testkit.Eventually(t, 30*time.Second, "answers from east and west", answers("east", "west"))

	policy := func(name string, targets ...string) *networkingv1alpha1.BackendTrafficPolicy {
		p := &networkingv1alpha1.BackendTrafficPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		for _, tg := range targets {
			p.Spec.TargetRefs = append(p.Spec.TargetRefs, importTarget(tg))
		}
		return p
	}
	checked := policy("echo", "echo")
	checked.Spec.HealthCheck = &networkingv1alpha1.HealthCheck{
		Type: networkingv1alpha1.HealthCheckHTTP, HTTP: &networkingv1alpha1.HTTPHealthCheck{Path: "/healthz"},
		Interval: "200ms", Timeout: "100ms",
	}
	if err := c.Create(ctx, checked); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "answers from east only", answers("east"))
	policyAccepted(t, c, "echo", metav1.ConditionTrue, gwv1.PolicyReasonAccepted, "applies to ServiceImport demo/echo", true)

	// "late" is newer, or as old to the second and after "echo" by name:
	// "echo" keeps the target either way.
	for _, p := range []*networkingv1alpha1.BackendTrafficPolicy{policy("late", "echo"), policy("ghost", "ghost")} {
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	policyAccepted(t, c, "late", metav1.ConditionFalse, gwv1.PolicyReasonConflicted, "BackendTrafficPolicy demo/echo applies there", false)
	policyAccepted(t, c, "ghost", metav1.ConditionFalse, gwv1.PolicyReasonTargetNotFound, "ServiceImport demo/ghost not found", false)

	// With the first policy gone, the other one applies: both clusters
	// answer again.
	if err := c.Delete(ctx, checked); err != nil {
		t.Fatal(err)
	}
	policyAccepted(t, c, "late", metav1.ConditionTrue, gwv1.PolicyReasonAccepted, "applies to ServiceImport demo/echo", true)
	testkit.Eventually(t, 30*time.Second, "answers from east and west again", answers("east", "west"))
}

// policyAccepted waits for a policy's Accepted condition, for the current
// generation, and for the Gateway as its ancestor when ancestor is set.
func policyAccepted(t *testing.T, c client.Client, name string, status metav1.ConditionStatus, reason gwv1.PolicyConditionReason, msg string, ancestor bool) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("policy %s Accepted=%s %s", name, status, reason), func(ctx context.Context) error {
		p := &networkingv1alpha1.BackendTrafficPolicy{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(p.Status.Conditions, string(gwv1.PolicyConditionAccepted))
		if cond == nil || cond.Status != status || cond.Reason != string(reason) || !strings.Contains(cond.Message, msg) || cond.ObservedGeneration != p.Generation {
			return fmt.Errorf("policy %s Accepted = %+v, want %s %s %q", name, cond, status, reason, msg)
		}
		if !ancestor {
			if len(p.Status.Ancestors) != 0 {
				return fmt.Errorf("policy %s ancestors = %+v, want none", name, p.Status.Ancestors)
			}
			return nil
		}
		if len(p.Status.Ancestors) != 1 || p.Status.Ancestors[0].AncestorRef.Name != "edge" || p.Status.Ancestors[0].ControllerName != keys.GatewayControllerName {
			return fmt.Errorf("policy %s ancestors = %+v, want Gateway demo/edge", name, p.Status.Ancestors)
		}
		return nil
	})
}
