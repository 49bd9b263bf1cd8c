// Package discovery_test runs fleetnet-discovery's pool sources on what
// fleetnet's own agents write: two clusters on real API servers, each with
// its agent, and a real registry. A Service exported from east, whose
// EndpointSlice refers to its Pods, is imported by west; the registry source
// serves it with the Pods' names as instance ids (the name travels from the
// exporting slice's targetRef through the registry), and the kubernetes
// source on west serves it from the imported slices, which refer to no Pod.
// Both label the pool with the export's spec.exportedLabels.
//
// Run with the fleet lock on a small machine:
//
//	flock -o /tmp/fleetnet-fleet.lock go test ./test/discovery/...
package discovery_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	agentapp "github.com/fleetnet/fleetnet/internal/agent/app"
	"github.com/fleetnet/fleetnet/internal/agent/identity"
	"github.com/fleetnet/fleetnet/internal/discovery/kubesource"
	"github.com/fleetnet/fleetnet/internal/discovery/registrysource"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	k8sdiscoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
)

const ns = "demo"

func logger(t *testing.T, name string) *slog.Logger {
	out := io.Discard
	if os.Getenv("FLEETNET_TEST_LOGS") != "" {
		out = os.Stderr
	}
	return slog.New(slog.NewTextHandler(out, nil)).With("component", name)
}

// startAgent runs cluster c's agent until the test ends.
func startAgent(t *testing.T, c *fleet.Cluster, reg *registrytest.Registry) {
	t.Helper()
	o := agentapp.Options{
		Identity:           identity.Flags{Source: identity.SourceFlags, ClusterID: c.Name, ClusterSetID: "fleet", Region: "region-" + c.Name},
		Registry:           reg.ClientOptions(c.Name, false),
		MetricsAddr:        "0",
		HealthAddr:         "0",
		ExportResyncPeriod: 10 * time.Minute,
		ImportResyncPeriod: 10 * time.Minute,
		EndpointsPerSlice:  100,
		ImportWorkers:      2,
		Registerer:         prometheus.NewRegistry(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agentapp.Run(ctx, c.Config, o, logger(t, "agent-"+c.Name)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("agent %s: %v", c.Name, err)
			}
		case <-time.After(45 * time.Second):
			t.Errorf("agent %s did not stop", c.Name)
		}
	})
}

// run runs a pool source until the test ends and waits for its sync.
func run(t *testing.T, name string, src interface {
	Run(context.Context) error
	Synced() <-chan struct{}
	Status() string
}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s source: %v", name, err)
		}
	})
	select {
	case <-src.Synced():
	case <-time.After(30 * time.Second):
		t.Fatalf("%s source not synced: %s", name, src.Status())
	}
}

// ids returns "cluster(region): instance ids" of a pool.
func ids(p *discoveryv1.Pool) string {
	if p == nil {
		return "<none>"
	}
	var parts []string
	for _, c := range p.Clusters {
		var ids []string
		for _, e := range c.Endpoints {
			ids = append(ids, e.InstanceID)
		}
		parts = append(parts, fmt.Sprintf("%s(%s): %s", c.Cluster, c.Region, strings.Join(ids, ",")))
	}
	return strings.Join(parts, "; ")
}

func waitPool(t *testing.T, st *store.Store, want string) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("pool demo/echo %q", want), func(context.Context) error {
		p, _ := st.Get(store.Key{Namespace: ns, Name: "echo"})
		if got := ids(p); got != want {
			return fmt.Errorf("pool demo/echo is %q, want %q", got, want)
		}
		return nil
	})
}

func TestPodNamesTravelThroughTheRegistry(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}, {Name: "west"}}})
	east, west := f.Cluster(t, "east"), f.Cluster(t, "west")
	reg := registrytest.Start(t, server.Config{})
	for _, c := range []*fleet.Cluster{east, west} {
		if err := c.Client(t).Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		startAgent(t, c, reg)
	}
	// east's Service, its slice (as the EndpointSlice controller writes it,
	// referring to the Pods) and its export.
	ec := east.Client(t)
	for _, o := range []client.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}},
		&k8sdiscoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "echo-x7k2p", Labels: map[string]string{k8sdiscoveryv1.LabelServiceName: "echo"}},
			AddressType: k8sdiscoveryv1.AddressTypeIPv4,
			Ports:       []k8sdiscoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
			Endpoints: []k8sdiscoveryv1.Endpoint{
				{Addresses: []string{"10.244.0.5"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "echo-6d5f-abcde"}},
				{Addresses: []string{"10.244.0.6"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "echo-6d5f-fghij"}, Conditions: k8sdiscoveryv1.EndpointConditions{Ready: ptr.To(false)}},
				{Addresses: []string{"10.244.0.7"}}, // no Pod behind it
			},
		},
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"},
			Spec: mcsv1beta1.ServiceExportSpec{ExportedLabels: map[string]string{"tier": "web"}}},
	} {
		if err := ec.Create(t.Context(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}

	// The registry source: the Pods' names, the address where there is
	// no Pod.
	rst := store.New(store.Options{Base: 100})
	run(t, "registry", registrysource.New(registrysource.Config{Client: reg.Client("discovery", true), Store: rst, Log: logger(t, "registry-source")}))
	waitPool(t, rst, "east(region-east): 10.244.0.7,echo-6d5f-abcde,echo-6d5f-fghij")
	p, _ := rst.Get(store.Key{Namespace: ns, Name: "echo"})
	for _, e := range p.Clusters[0].Endpoints {
		if wantReady := e.InstanceID != "echo-6d5f-fghij"; e.Ready != wantReady {
			t.Errorf("registry source: %s ready=%v, want %v", e.InstanceID, e.Ready, wantReady)
		}
	}

	// The kubernetes source on west: the imported slices, <cluster>/<address>.
	kst := store.New(store.Options{Base: 100})
	mc, err := mcsclient.NewForConfig(west.Config)
	if err != nil {
		t.Fatal(err)
	}
	ksrc, err := kubesource.New(kubesource.Config{Client: west.Clientset(t), MCSClient: mc, Store: kst, Selection: kubesource.SelectionMCS, Log: logger(t, "kubernetes-source")})
	if err != nil {
		t.Fatal(err)
	}
	run(t, "kubernetes", ksrc)
	waitPool(t, kst, "east(region-east): east/10.244.0.5,east/10.244.0.6,east/10.244.0.7")

	// Both serve the exported labels as the pool's.
	for name, st := range map[string]*store.Store{"registry": rst, "kubernetes": kst} {
		testkit.Eventually(t, 30*time.Second, fmt.Sprintf("the %s source's pool labels", name), func(context.Context) error {
			p, _ := st.Get(store.Key{Namespace: ns, Name: "echo"})
			if p == nil || len(p.Labels) != 1 || p.Labels["tier"] != "web" {
				return fmt.Errorf("%s source: pool labels %v, want tier=web", name, p)
			}
			return nil
		})
	}

	// The imported slices refer to no Pod (nor node): west has none of them.
	list, err := west.Clientset(t).DiscoveryV1().EndpointSlices(ns).List(t.Context(), metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName + "=echo"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) == 0 {
		t.Fatal("west has no imported slice of echo")
	}
	for _, s := range list.Items {
		if s.Labels[k8sdiscoveryv1.LabelManagedBy] != keys.EndpointSliceManagedBy {
			t.Errorf("slice %s is not the agent's", s.Name)
		}
		for _, e := range s.Endpoints {
			if e.TargetRef != nil || e.NodeName != nil {
				t.Errorf("imported endpoint %v refers to %v / node %v", e.Addresses, e.TargetRef, e.NodeName)
			}
		}
	}

	// A Pod leaves east: both sources follow.
	s := &k8sdiscoveryv1.EndpointSlice{}
	if err := ec.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "echo-x7k2p"}, s); err != nil {
		t.Fatal(err)
	}
	s.Endpoints = slices.DeleteFunc(s.Endpoints, func(e k8sdiscoveryv1.Endpoint) bool { return e.Addresses[0] == "10.244.0.6" })
	if err := ec.Update(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	waitPool(t, rst, "east(region-east): 10.244.0.7,echo-6d5f-abcde")
	waitPool(t, kst, "east(region-east): east/10.244.0.5,east/10.244.0.7")
}
