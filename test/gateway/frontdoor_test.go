package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/azure/armsim"
	gatewayapp "github.com/fleetnet/fleetnet/internal/gateway/app"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// fleetnet-gateway with --azure-front-door-classes on a real API server
// and a simulated ARM: a Gateway of the Front Door class becomes a
// profile (not an edge configuration), its Programmed condition follows
// Front Door's deployment to True; a Gateway with a malformed Azure
// annotation is Accepted=False naming it, and nothing is created for it;
// the deleted Gateway's profile is withdrawn.
func TestFrontDoorGateway(t *testing.T) {
	const (
		sub = "00000000-0000-0000-0000-0000000000fd"
		rg  = "fleet"
	)
	sim := armsim.New(armsim.Options{Polls: 1, DeployReads: 2})
	fronts, err := sim.SeedRegionalLoadBalancer(sub, "mc-east", "kubernetes", "eastus", armsim.RegionalFrontend{Name: "web", TCP: []int32{80}})
	if err != nil {
		t.Fatal(err)
	}
	hub := startHub(t)
	c := hub.Client(t)
	ctx := t.Context()
	startGateway(t, hub.Config, gatewayapp.Options{
		Azure: gatewayapp.AzureOptions{SubscriptionID: sub, ResourceGroup: rg, Location: "westeurope", Credential: "default",
			PollInterval: time.Second, Resync: time.Hour, FrontDoorClasses: "afd=Standard", FrontDoorAbsentFor: time.Second,
			TokenCredential: &azfake.TokenCredential{},
			ClientOptions: &arm.ClientOptions{ClientOptions: policy.ClientOptions{Transport: sim.Transport(),
				Retry: policy.RetryOptions{MaxRetries: 2, RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond}}}},
	}, quiet)

	gateway := func(name string, ann map[string]string) *gwv1.Gateway {
		return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann}, Spec: gwv1.GatewaySpec{
			GatewayClassName: "afd", Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}}}
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "afd"}, Spec: gwv1.GatewayClassSpec{ControllerName: keys.GatewayControllerName}},
		gateway("public", map[string]string{keys.AnnotationAzureProbePath: "/healthz"}),
		gateway("typo", map[string]string{"fleetnet.dev/azure-probe-pth": "/healthz"}),
		gateway("private", map[string]string{keys.AnnotationAzureConnectivity: "private-link"}),
		&mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}, Spec: mcsv1beta1.ServiceImportSpec{
			Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		}},
		&discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo-east", Annotations: map[string]string{keys.AnnotationRegionalFrontend: fronts[0]}, Labels: map[string]string{
				mcsv1beta1.LabelServiceName: "echo", mcsv1beta1.LabelSourceCluster: "east", discoveryv1.LabelManagedBy: keys.EndpointSliceManagedBy,
			}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		},
		&gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}, Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "public"}}},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
				Group: ptr.To(gwv1.Group(mcsv1beta1.GroupName)), Kind: ptr.To(gwv1.Kind("ServiceImport")), Name: "echo", Port: ptr.To[gwv1.PortNumber](80),
			}}}}}, {
				// Front Door matches paths only: this rule is refused.
				Matches: []gwv1.HTTPRouteMatch{{Headers: []gwv1.HTTPHeaderMatch{{Name: "x-canary", Value: "1"}}}},
				BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
					Group: ptr.To(gwv1.Group(mcsv1beta1.GroupName)), Kind: ptr.To(gwv1.Kind("ServiceImport")), Name: "echo", Port: ptr.To[gwv1.PortNumber](80),
				}}}},
			}},
		}},
	}
	create(t, c, objs...)
	condition := func(ctx context.Context, name, typ string) (*metav1.Condition, error) {
		gw := &gwv1.Gateway{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, gw); err != nil {
			return nil, err
		}
		cond := meta.FindStatusCondition(gw.Status.Conditions, typ)
		if cond == nil {
			return nil, fmt.Errorf("Gateway %s has no %s condition", name, typ)
		}
		return cond, nil
	}
	var messages []string
	testkit.Eventually(t, 60*time.Second, "Gateway public to be programmed by Front Door", func(ctx context.Context) error {
		prog, err := condition(ctx, "public", string(gwv1.GatewayConditionProgrammed))
		if err != nil {
			return err
		}
		if len(messages) == 0 || messages[len(messages)-1] != prog.Message {
			messages = append(messages, prog.Message)
		}
		// profile, endpoint, origin group, origin, route: the whole graph
		// (an earlier model may have had the Gateway without its route)
		if prog.Status != metav1.ConditionTrue || !strings.Contains(prog.Message, "served by Azure Front Door Standard profile") ||
			!strings.Contains(prog.Message, "all 5 resources deployed") {
			return fmt.Errorf("Programmed %s: %s", prog.Status, prog.Message)
		}
		return nil
	})
	t.Logf("Programmed messages of Gateway public:\n%s", strings.Join(messages, "\n"))
	var sawDeploying bool
	for _, m := range messages {
		sawDeploying = sawDeploying || strings.Contains(m, "provisioned, deployment")
	}
	if !sawDeploying {
		t.Errorf("Programmed never told a deployment in progress: %q", messages)
	}
	if n := len(sim.Resources(armsim.TypeProfile)); n != 1 {
		t.Errorf("profiles: %d, want 1 (public only)", n)
	}
	if n := len(sim.Resources(armsim.TypeRoute)); n != 1 {
		t.Errorf("routes: %d, want 1", n)
	}
	testkit.Eventually(t, 30*time.Second, "Accepted=False naming the malformed annotations", func(ctx context.Context) error {
		for name, want := range map[string]string{
			"typo": `annotation fleetnet.dev/azure-probe-pth="/healthz": unknown annotation`,
			// the class selects Standard
			"private": `annotation fleetnet.dev/azure-connectivity="private-link": Private Link origins need Front Door Premium, and the tier is Standard`,
		} {
			acc, err := condition(ctx, name, string(gwv1.GatewayConditionAccepted))
			if err != nil {
				return err
			}
			if acc.Status != metav1.ConditionFalse || acc.Reason != string(gwv1.GatewayReasonInvalidParameters) || !strings.Contains(acc.Message, want) {
				return fmt.Errorf("%s Accepted %s %s: %s", name, acc.Status, acc.Reason, acc.Message)
			}
		}
		return nil
	})

	testkit.Eventually(t, 30*time.Second, "the route PartiallyInvalid for its header match", func(ctx context.Context) error {
		route := &gwv1.HTTPRoute{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, route); err != nil {
			return err
		}
		if len(route.Status.Parents) != 1 {
			return fmt.Errorf("parents %+v", route.Status.Parents)
		}
		conds := route.Status.Parents[0].Conditions
		pi := meta.FindStatusCondition(conds, string(gwv1.RouteConditionPartiallyInvalid))
		if !meta.IsStatusConditionTrue(conds, string(gwv1.RouteConditionAccepted)) || pi == nil || pi.Status != metav1.ConditionTrue ||
			pi.Reason != string(gwv1.RouteReasonUnsupportedValue) || !strings.Contains(pi.Message, "rule 1 match 0: header matches (x-canary) are not expressible") {
			return fmt.Errorf("route conditions %+v", conds)
		}
		return nil
	})

	// Azure refuses a write (403): Programmed=False with the ARM code and
	// message, one Warning event on the Gateway, and what serves stays.
	forbidden := sim.Inject(armsim.Fault{API: "RoutesClient.BeginCreate", Method: http.MethodPut, Err: &armsim.Error{Status: http.StatusForbidden,
		Code: "AuthorizationFailed", Message: "The client does not have authorization to perform action 'Microsoft.Cdn/profiles/afdEndpoints/routes/write'."}})
	docs := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "docs"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "public"}}},
		Rules: []gwv1.HTTPRouteRule{{
			Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To("/docs")}}},
			BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
				Group: ptr.To(gwv1.Group(mcsv1beta1.GroupName)), Kind: ptr.To(gwv1.Kind("ServiceImport")), Name: "echo", Port: ptr.To[gwv1.PortNumber](80),
			}}}}}},
	}}
	if err := c.Create(ctx, docs); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "Programmed=False with the 403 and its Warning event", func(ctx context.Context) error {
		prog, err := condition(ctx, "public", string(gwv1.GatewayConditionProgrammed))
		if err != nil {
			return err
		}
		if prog.Status != metav1.ConditionFalse || !strings.Contains(prog.Message, "403 AuthorizationFailed: The client does not have authorization") {
			return fmt.Errorf("Programmed %s: %s", prog.Status, prog.Message)
		}
		evs := &eventsv1.EventList{}
		if err := c.List(ctx, evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "public" && e.Type == corev1.EventTypeWarning && e.Reason == keys.ReasonAzureAuthorizationFailed && strings.Contains(e.Note, "403 AuthorizationFailed") {
				return nil
			}
		}
		return fmt.Errorf("no %s event among %d", keys.ReasonAzureAuthorizationFailed, len(evs.Items))
	})
	if n := len(sim.Resources(armsim.TypeRoute)); n != 1 {
		t.Errorf("routes after the refused write: %d, want the 1 that served", n)
	}
	forbidden.Remove()
	if err := c.Delete(ctx, docs); err != nil {
		t.Fatal(err)
	}

	// Resume tokens live in the Gateway's annotation (on a Gateway the
	// provider does not serve, so that it does not resume and drop them).
	tokens := &gatewayapp.AnnotationTokens{Client: c}
	want := map[string]string{"put|route|fn-a/fn-b/fn-c": `{"type":"Fake"}`}
	if err := tokens.Save(ctx, ns+"/typo", want); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the saved resume tokens", func(ctx context.Context) error {
		got, err := tokens.Load(ctx, ns+"/typo")
		if err != nil {
			return err
		}
		if len(got) != 1 || got["put|route|fn-a/fn-b/fn-c"] != want["put|route|fn-a/fn-b/fn-c"] {
			return fmt.Errorf("tokens %v", got)
		}
		return nil
	})
	if err := tokens.Save(ctx, ns+"/typo", nil); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the resume tokens' annotation to be removed", func(ctx context.Context) error {
		gw := &gwv1.Gateway{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "typo"}, gw); err != nil {
			return err
		}
		if _, ok := gw.Annotations[keys.AnnotationAzureOperations]; ok || gw.Annotations["fleetnet.dev/azure-probe-pth"] != "/healthz" {
			return fmt.Errorf("annotations %v", gw.Annotations)
		}
		return nil
	})
	if err := tokens.Save(ctx, ns+"/gone", want); err != nil {
		t.Errorf("saving tokens of a Gateway that is gone: %v", err)
	}

	if err := c.Delete(ctx, gateway("public", nil)); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "the deleted Gateway's profile to be withdrawn", func(context.Context) error {
		if n := len(sim.Resources(armsim.TypeProfile)); n != 0 {
			return fmt.Errorf("%d profiles left", n)
		}
		return nil
	})
}
