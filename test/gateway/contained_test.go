package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	gatewayapp "github.com/fleetnet/fleetnet/internal/gateway/app"
	"github.com/fleetnet/fleetnet/internal/gateway/provider"
	"github.com/fleetnet/fleetnet/internal/testkit"
	networkingac "github.com/fleetnet/fleetnet/pkg/generated/applyconfiguration/networking/v1alpha1"
	"github.com/fleetnet/fleetnet/pkg/generated/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// servingProvider serves every model at once and keeps the last.
type servingProvider struct {
	mu   sync.Mutex
	last *edgev1.Model
}

func (p *servingProvider) Deploy(_ context.Context, m *edgev1.Model) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = m
	return nil
}

func (p *servingProvider) Progress() provider.Progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		return provider.Progress{Message: "nothing deployed"}
	}
	return provider.Progress{Version: p.last.Version, Served: true, Message: "served", Addresses: []string{"192.0.2.10"}}
}

func (p *servingProvider) gateway(ns, name string) (edgev1.Gateway, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		return edgev1.Gateway{}, false
	}
	for _, g := range p.last.Gateways {
		if g.Namespace == ns && g.Name == name {
			return g, true
		}
	}
	return edgev1.Gateway{}, false
}

// warnings are the reasons of the Warning events about the object named
// in the test namespace.
func warnings(ctx context.Context, c client.Client, name string) ([]string, error) {
	return warningReasons(ctx, c, ns, name)
}

// A failing cloud provider's error is its own load balancers': the edge's
// Gateway and load balancer stay Programmed without a Warning, the cloud's
// load balancer is Programmed=False with the cause and gets a Warning event.
func TestCloudFailureStaysOnItsObjects(t *testing.T) {
	hub := startHub(t)
	c := hub.Client(t)
	ctx := t.Context()
	cs, err := versioned.NewForConfig(hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	startGateway(t, hub.Config, gatewayapp.Options{Provider: &servingProvider{},
		Clouds: map[string]provider.Provider{"azure-cross-region": failingProvider{}}}, quiet)
	create(t, c, dbObjects()...)
	create(t, c,
		&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "fleetnet"}, Spec: gwv1.GatewayClassSpec{ControllerName: keys.GatewayControllerName}},
		&gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"}, Spec: gwv1.GatewaySpec{
			GatewayClassName: "fleetnet",
			Listeners:        []gwv1.Listener{{Name: "http", Port: 8080, Protocol: gwv1.HTTPProtocolType}},
		}},
	)
	for name, class := range map[string]string{"local": "edge", "remote": "azure-cross-region"} {
		lb := networkingac.MultiClusterLoadBalancer(name, ns).WithSpec(networkingac.MultiClusterLoadBalancerSpec().WithServiceImportName("db").
			WithClass(networkingv1alpha1.LoadBalancerClass(class)).
			WithPorts(networkingac.LoadBalancerPort().WithPort(int32(testkit.FreePort(t))).WithProtocol(networkingv1alpha1.ProtocolTCP).WithTargetPort(5432)))
		if _, err := cs.NetworkingV1alpha1().MultiClusterLoadBalancers(ns).Apply(ctx, lb, metav1.ApplyOptions{FieldManager: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	lbCondition(t, cs, "remote", networkingv1alpha1.LoadBalancerConditionProgrammed, metav1.ConditionFalse, keys.ReasonDeployFailed,
		func(lb *networkingv1alpha1.MultiClusterLoadBalancer) error {
			if c := meta.FindStatusCondition(lb.Status.Conditions, networkingv1alpha1.LoadBalancerConditionProgrammed); !strings.Contains(c.Message, "quota exceeded") {
				return fmt.Errorf("Programmed message %q does not name the cause", c.Message)
			}
			return nil
		})
	testkit.Eventually(t, 30*time.Second, "a DeployFailed Warning on the cloud's load balancer", func(ctx context.Context) error {
		got, err := warnings(ctx, c, "remote")
		if err != nil || !slices.Contains(got, keys.ReasonDeployFailed) {
			return fmt.Errorf("Warning events of remote: %v (%v)", got, err)
		}
		return nil
	})
	lbCondition(t, cs, "local", networkingv1alpha1.LoadBalancerConditionProgrammed, metav1.ConditionTrue, networkingv1alpha1.LoadBalancerReasonProgrammed, nil)
	testkit.Eventually(t, 30*time.Second, "the edge's Gateway Programmed", func(ctx context.Context) error {
		gw := &gwv1.Gateway{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "edge"}, gw); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed)) {
			return fmt.Errorf("Programmed: %+v", meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed)))
		}
		return nil
	})
	for _, name := range []string{"edge", "local"} {
		if got, err := warnings(ctx, c, name); err != nil || len(got) > 0 {
			t.Errorf("Warning events about %s, which the cloud provider does not serve: %v (%v)", name, got, err)
		}
	}
}

// A Gateway whose edit is refused keeps serving its last accepted
// generation (fail static), says so in Programmed, and is withdrawn only
// when deleted.
func TestRefusedGatewayKeepsServing(t *testing.T) {
	hub := startHub(t)
	c := hub.Client(t)
	prov := &servingProvider{}
	startGateway(t, hub.Config, gatewayapp.Options{Provider: prov}, quiet)
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "fleetnet"}, Spec: gwv1.GatewayClassSpec{ControllerName: keys.GatewayControllerName}},
		&gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: gwv1.GatewaySpec{
			GatewayClassName: "fleetnet",
			Listeners:        []gwv1.Listener{{Name: "http", Port: 8080, Protocol: gwv1.HTTPProtocolType}},
		}},
	)
	programmed := func(status metav1.ConditionStatus, reason, msg string) {
		t.Helper()
		testkit.Eventually(t, 30*time.Second, fmt.Sprintf("Programmed=%s %s", status, reason), func(ctx context.Context) error {
			gw := &gwv1.Gateway{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, gw); err != nil {
				return err
			}
			p := meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed))
			if p == nil || p.Status != status || p.Reason != reason || p.ObservedGeneration != gw.Generation || !strings.Contains(p.Message, msg) {
				return fmt.Errorf("Programmed = %+v", p)
			}
			return nil
		})
	}
	programmed(metav1.ConditionTrue, string(gwv1.GatewayReasonProgrammed), "")

	// An edit the controller refuses: spec.addresses.
	gw := &gwv1.Gateway{}
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "web"}, gw); err != nil {
		t.Fatal(err)
	}
	gw.Spec.Addresses = []gwv1.GatewaySpecAddress{{Value: "192.0.2.99"}}
	gw.Spec.Listeners[0].Port = 8081
	if err := c.Update(t.Context(), gw); err != nil {
		t.Fatal(err)
	}
	programmed(metav1.ConditionFalse, string(gwv1.GatewayReasonInvalid), "the last accepted configuration (generation 1) still serves")
	g, ok := prov.gateway(ns, "web")
	if !ok || g.Refused == "" || g.Generation != 1 || len(g.Listeners) != 1 || g.Listeners[0].Port != 8080 {
		t.Errorf("the provider's model holds %+v (present %v), want generation 1 on port 8080, refused", g, ok)
	}

	if err := c.Delete(t.Context(), gw); err != nil {
		t.Fatal(err)
	}
	testkit.Until(t, 30*time.Second, "the deleted Gateway withdrawn", func() bool {
		_, ok := prov.gateway(ns, "web")
		return !ok
	})
}
