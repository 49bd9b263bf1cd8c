package afde2e_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/azure/afde2e"
	"github.com/fleetnet/fleetnet/internal/azure/armsim"
	gatewayapp "github.com/fleetnet/fleetnet/internal/gateway/app"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
)

const (
	sub      = "00000000-0000-0000-0000-00000000e2e0"
	rg       = "fleetnet-afd-e2e"
	memberRG = "mc-member"
	// privateAddress is the internal load balancer frontend's address in
	// the simulation: reachable from the simulated Front Door only
	// through an approved Private Link connection.
	privateAddress = "10.1.0.10"
)

// world is the simulated Azure served on loopback (ARM over HTTPS, Front
// Door's data plane over HTTP), one backend, a hub API server and
// fleetnet-gateway serving both tiers' e2e classes through the HTTPS
// endpoint.
type world struct {
	sim      *armsim.Sim
	arm      *armsim.Server
	caFile   string
	edge     string
	backend  *httptest.Server
	hub      client.Client
	frontend string // the public regional frontend
	pls      armsim.ID
	internal string // the internal frontend behind pls
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{sim: armsim.New(armsim.Options{Polls: 1, DeployReads: 2})}
	dir := t.TempDir()
	ca, err := pki.NewCA("armsim")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.ServingCert("armsim", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(dir, "ca"); err != nil {
		t.Fatal(err)
	}
	w.caFile = filepath.Join(dir, "ca.crt")
	cert, err := serving.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	if w.arm, err = armsim.Serve(w.sim, "127.0.0.1:0", cert); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.arm.Close() })

	// The backend: the Gateway API echo server's habit of reflecting the
	// request (its headers) in a JSON body, and a health probe path.
	w.backend = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(map[string]any{"path": r.URL.Path, "host": r.Host, "headers": r.Header})
	}))
	t.Cleanup(w.backend.Close)

	fronts, err := w.sim.SeedRegionalLoadBalancer(sub, memberRG, "kubernetes", "westeurope", armsim.RegionalFrontend{Name: "web", TCP: []int32{80}})
	if err != nil {
		t.Fatal(err)
	}
	w.frontend = fronts[0]
	pip, ok := armsim.Lookup[armnetwork.PublicIPAddress](w.sim, armsim.ResourceID(sub, memberRG, armsim.TypePublicIPAddress, "kubernetes-web"))
	if !ok || pip.Properties == nil || pip.Properties.IPAddress == nil {
		t.Fatal("the seeded public IP address has no address")
	}
	w.seedPrivate(t)
	// The simulated network: the public frontend's address and the
	// internal one both lead to the backend.
	backendAddr := w.backend.Listener.Addr().String()
	routes := map[string]string{net.JoinHostPort(*pip.Properties.IPAddress, "80"): backendAddr, net.JoinHostPort(privateAddress, "80"): backendAddr}
	edge := w.sim.Edge()
	edge.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		to, ok := routes[addr]
		if !ok {
			return nil, fmt.Errorf("the simulated network has no route to %s", addr)
		}
		return (&net.Dialer{}).DialContext(ctx, network, to)
	}
	edgeSrv := httptest.NewServer(edge)
	t.Cleanup(edgeSrv.Close)
	w.edge = edgeSrv.Listener.Addr().String()

	hub := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "hub", GatewayAPI: true}}}).Cluster(t, "hub")
	w.hub = hub.Client(t)
	w.startGateway(t, hub)
	return w
}

// seedPrivate adds an internal load balancer frontend and a Private Link
// Service on it.
func (w *world) seedPrivate(t *testing.T) {
	lbID := armsim.ResourceID(sub, memberRG, armsim.TypeLoadBalancer, "kubernetes-internal")
	feID := lbID.Child("frontendIPConfigurations", "web")
	lb := armnetwork.LoadBalancer{Location: to.Ptr("westeurope"),
		SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard), Tier: to.Ptr(armnetwork.LoadBalancerSKUTierRegional)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{
			ID: to.Ptr(feID.String()), Name: to.Ptr("web"),
			Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PrivateIPAddress: to.Ptr(privateAddress),
				Subnet: &armnetwork.Subnet{ID: to.Ptr("/subscriptions/" + sub + "/resourceGroups/" + memberRG + "/providers/Microsoft.Network/virtualNetworks/vnet/subnets/lb")}}}}}}
	if err := w.sim.Seed(lbID, lb); err != nil {
		t.Fatal(err)
	}
	w.pls = armsim.ResourceID(sub, memberRG, armsim.TypePrivateLinkService, "pls-web")
	// Its owner consents to fleetnet's approval by the tag
	// (docs/azure-front-door.md, Private Link).
	if err := w.sim.Seed(w.pls, armnetwork.PrivateLinkService{Location: to.Ptr("westeurope"), Tags: map[string]*string{keys.TagAzurePLSApproval: to.Ptr(keys.PLSApprovalAuto)},
		Properties: &armnetwork.PrivateLinkServiceProperties{LoadBalancerFrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{ID: to.Ptr(feID.String())}}}}); err != nil {
		t.Fatal(err)
	}
	w.internal = feID.String()
}

// armOptions reach the simulation over HTTPS, trusting its CA, as the
// program does from Config.ARMEndpoint and CAFile.
func (w *world) armOptions(t *testing.T) *arm.ClientOptions {
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(w.caFile)
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("reading the CA: %v", err)
	}
	return &arm.ClientOptions{ClientOptions: policy.ClientOptions{
		Cloud: cloud.Configuration{ActiveDirectoryAuthorityHost: cloud.AzurePublic.ActiveDirectoryAuthorityHost,
			Services: map[cloud.ServiceName]cloud.ServiceConfiguration{cloud.ResourceManager: {Endpoint: w.arm.URL, Audience: cloud.AzurePublic.Services[cloud.ResourceManager].Audience}}},
		Transport: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}},
		Retry:     policy.RetryOptions{MaxRetries: 2, RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 50 * time.Millisecond},
	}}
}

// startGateway runs fleetnet-gateway with both tiers' e2e classes,
// reaching the simulation through its HTTPS endpoint.
func (w *world) startGateway(t *testing.T, hub *fleet.Cluster) {
	dir := t.TempDir()
	ca, _ := pki.NewCA("fleet")
	serving, _ := ca.ServingCert("gateway", []string{"127.0.0.1"})
	for name, kp := range map[string]*pki.KeyPair{"ca": ca, "gateway": serving} {
		if err := kp.Write(dir, name); err != nil {
			t.Fatal(err)
		}
	}
	o := gatewayapp.Options{ClusterID: "hub", EdgeListen: testkit.FreeAddr(t), MetricsAddr: "0", HealthAddr: "0",
		TLSCertFile: filepath.Join(dir, "gateway.crt"), TLSKeyFile: filepath.Join(dir, "gateway.key"), ClientCAFile: filepath.Join(dir, "ca.crt"),
		Azure: gatewayapp.AzureOptions{SubscriptionID: sub, ResourceGroup: rg, Location: "westeurope", Credential: "default",
			PollInterval: time.Second, Resync: time.Hour, FrontDoorAbsentFor: time.Second,
			FrontDoorClasses: "afd-e2e-standard=Standard,afd-e2e-premium=Premium",
			TokenCredential:  afde2e.SimulationCredential{}, ClientOptions: w.armOptions(t)}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gatewayapp.Run(ctx, hub.Config, o, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("fleetnet-gateway stopped with %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("fleetnet-gateway did not stop")
		}
	})
}

// imported writes ServiceImport echo in ns and its slice, as the agent
// would: annotated with the cluster's public frontend, or its Private
// Link Service with the export's consent to approval.
func (w *world) imported(t *testing.T, ns string, private bool) {
	ann := map[string]string{keys.AnnotationRegionalFrontend: w.frontend}
	if private {
		ann = map[string]string{keys.AnnotationRegionalFrontend: w.internal, keys.AnnotationPrivateLinkService: w.pls.String()}
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}, Spec: mcsv1beta1.ServiceImportSpec{
			Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}},
		&discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo-member", Annotations: ann, Labels: map[string]string{
				mcsv1beta1.LabelServiceName: "echo", mcsv1beta1.LabelSourceCluster: "member", discoveryv1.LabelManagedBy: keys.EndpointSliceManagedBy}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		},
	} {
		if err := w.hub.Create(t.Context(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// TestProgramAgainstSimulation runs hack/azure-e2e's steps, as make runs
// them, against the simulation served on loopback and a real API server:
// setup, tests and cleanup pass for the public topology on Standard and
// the Private Link topology on Premium (each check of Tests included:
// Programmed, tags, WAF attached and blocking, probe path, Private Link
// approved, traffic from the backend; cleanup's sustained block); setup
// assigns exactly the listed roles; cleanup fails, saying so, when the
// withdrawal does not finish within its bound, and succeeds once it can.
func TestProgramAgainstSimulation(t *testing.T) {
	w := newWorld(t)
	for _, tc := range []struct {
		name, tier, connectivity string
		// hangWithdrawal keeps the profile's deletion running past
		// cleanup's bound.
		hangWithdrawal bool
	}{
		{name: "standard-public", tier: "Standard", connectivity: "public"},
		{name: "premium-private-link", tier: "Premium", connectivity: "private-link"},
		{name: "withdrawal-past-bound", tier: "Standard", connectivity: "public", hangWithdrawal: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "afd-" + tc.name
			w.imported(t, ns, tc.connectivity == "private-link")
			var out bytes.Buffer
			cfg := afde2e.Config{SubscriptionID: sub, ResourceGroup: rg, Location: "westeurope", Tier: tc.tier, Connectivity: tc.connectivity,
				Namespace: ns, Gateway: "afd", Service: "echo", ProbePath: "/healthz", Timeout: 90 * time.Second, BlockedFor: 2 * time.Second,
				PollEvery: 200 * time.Millisecond, PrincipalID: "11111111-2222-3333-4444-555555555555", AssignRoles: true,
				MemberResourceGroups: []string{memberRG}, ARMEndpoint: w.arm.URL, CAFile: w.caFile, EdgeAddress: w.edge, CheckEcho: true,
				Credential: afde2e.SimulationCredential{}, Kube: w.hub, Out: &out}
			defer func() {
				if t.Failed() {
					t.Logf("program output:\n%s", out.String())
				}
			}()
			ctx := t.Context()
			if err := afde2e.Setup(ctx, cfg); err != nil {
				t.Fatalf("setup: %v", err)
			}
			if got, want := len(w.arm.RoleAssignments()), len(afde2e.Assignments(cfg)); got < want {
				t.Errorf("role assignments made: %d, want at least %d", got, want)
			}
			for _, a := range afde2e.Assignments(cfg) {
				if !strings.Contains(out.String(), "--role "+a.Role+" --scope "+a.Scope) {
					t.Errorf("setup did not print the %s assignment on %s", a.RoleName, a.Scope)
				}
			}
			if err := afde2e.Tests(ctx, cfg); err != nil {
				t.Fatalf("tests: %v", err)
			}
			if tc.hangWithdrawal {
				w.sim.Hold(armsim.TypeProfile)
				bounded := cfg
				bounded.Timeout = 3 * time.Second
				err := afde2e.Cleanup(ctx, bounded)
				if err == nil || !strings.Contains(err.Error(), "the profile's withdrawal: not done within 3s") {
					t.Errorf("cleanup with the withdrawal hanging: %v, want the withdrawal's timeout", err)
				}
				w.sim.Release(armsim.TypeProfile)
			}
			if err := afde2e.Cleanup(ctx, cfg); err != nil {
				t.Fatalf("cleanup: %v", err)
			}
			if !tc.hangWithdrawal && !strings.Contains(out.String(), "none served") {
				t.Errorf("cleanup did not report the sustained block:\n%s", out.String())
			}
		})
	}
	if n := len(w.sim.Resources(armsim.TypeProfile)); n != 0 {
		t.Errorf("%d profiles left after the cleanups", n)
	}
}
