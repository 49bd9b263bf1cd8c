package app_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/discovery/app"
	"github.com/fleetnet/fleetnet/internal/discovery/client"
	"github.com/fleetnet/fleetnet/internal/discovery/discoverytest"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	registryserver "github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	k8sdiscoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// defaults returns the flags' defaults plus what a valid run needs.
func defaults() app.Options {
	var o app.Options
	o.BindFlags(pflag.NewFlagSet("test", pflag.ContinueOnError))
	o.TokensFile = "tokens.csv"
	return o
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*app.Options)
		want string
	}{
		{"the defaults with tokens", func(*app.Options) {}, ""},
		{"unknown pool source", func(o *app.Options) { o.PoolSource = "etcd" }, `--pool-source="etcd": unknown; one of kubernetes, memory, registry`},
		{"registry with a certificate and static routers", func(o *app.Options) {
			o.PoolSource, o.Registry.Address, o.Registry.CAFile = "registry", "registry.fleet:7443", "ca.crt"
			o.Registry.CertFile, o.Registry.KeyFile, o.Routers = "d.crt", "d.key", []string{"r0=10.0.0.1:80"}
		}, ""},
		{"registry without an address", func(o *app.Options) {
			o.PoolSource, o.Registry.CAFile, o.Registry.TokenFile = "registry", "ca.crt", "token"
		}, "--registry: required with --pool-source=registry"},
		{"registry address without a port", func(o *app.Options) {
			o.PoolSource, o.Registry.Address, o.Registry.CAFile, o.Registry.TokenFile = "registry", "registry.fleet", "ca.crt", "token"
		}, `--registry="registry.fleet"`},
		{"registry without an identity", func(o *app.Options) {
			o.PoolSource, o.Registry.Address, o.Registry.CAFile = "registry", "registry.fleet:7443", "ca.crt"
		}, "--registry-cert-file or --registry-token-file: the registry needs a client identity"},
		{"registry with a certificate and a token", func(o *app.Options) {
			o.PoolSource, o.Registry.Address, o.Registry.CAFile = "registry", "registry.fleet:7443", "ca.crt"
			o.Registry.CertFile, o.Registry.KeyFile, o.Registry.TokenFile = "d.crt", "d.key", "token"
		}, `--registry-cert-file="d.crt" and --registry-token-file="token": give one`},
		{"registry flags for another source", func(o *app.Options) { o.Registry.Address = "registry.fleet:7443" }, `--registry="registry.fleet:7443": only for --pool-source=registry`},
		{"kubernetes with karmada slices", func(o *app.Options) {
			o.PoolSource, o.SliceSelection, o.RoutersService, o.ClusterName = "kubernetes", "karmada", "routing/router", "hub"
		}, ""},
		{"unknown slice selection", func(o *app.Options) { o.PoolSource, o.SliceSelection = "kubernetes", "istio" }, `--slice-selection="istio": one of mcs, karmada`},
		{"routers service without namespace", func(o *app.Options) { o.PoolSource, o.RoutersService = "kubernetes", "router" }, `--routers-service="router": want NAMESPACE/NAME`},
		{"routers service with a bad name", func(o *app.Options) { o.PoolSource, o.RoutersService = "kubernetes", "routing/Router" }, `--routers-service="routing/Router": name "Router"`},
		{"unknown pool labels", func(o *app.Options) { o.PoolLabels = "services"; o.PoolSource = "kubernetes" }, `--pool-labels="services": serviceimports or none`},
		{"no pool labels", func(o *app.Options) { o.PoolLabels = "none"; o.PoolSource = "kubernetes" }, ""},
		{"bad cluster name", func(o *app.Options) { o.PoolSource, o.ClusterName = "kubernetes", "Hub_1" }, `--cluster-name="Hub_1"`},
		{"kubeconfig for the memory source", func(o *app.Options) { o.Kubeconfig = "kc" }, `--kubeconfig="kc": only for --pool-source=kubernetes`},
		{"static routers for kubernetes", func(o *app.Options) { o.PoolSource, o.Routers = "kubernetes", []string{"r0=10.0.0.1:80"} }, `--routers: a static list is for --pool-source=memory or registry`},
		{"no authentication", func(o *app.Options) { o.TokensFile = "" }, "no authentication: set --tokens-file, --client-ca-file or both"},
		{"client CA without TLS", func(o *app.Options) { o.ClientCAFile = "ca.crt" }, `--client-ca-file="ca.crt": client certificates need TLS`},
		{"a certificate without its key", func(o *app.Options) { o.TLSCertFile = "d.crt" }, `--tls-cert-file="d.crt" and --tls-key-file="": give both or neither`},
		{"listen without a port", func(o *app.Options) { o.Listen = "localhost" }, `--listen="localhost"`},
		{"bad metrics address", func(o *app.Options) { o.MetricsAddr = "9090" }, `--metrics-addr="9090"`},
		{"probes disabled", func(o *app.Options) { o.HealthAddr, o.MetricsAddr = "", "" }, ""},
		{"lease too short", func(o *app.Options) { o.LeaseTTL = time.Millisecond }, "--lease-ttl=1ms: must be from 1s to 1h0m0s"},
		{"no registration per identity", func(o *app.Options) { o.MaxRegistrations = 0 }, "--max-registrations-per-identity=0: must be at least 1"},
		{"negative grace", func(o *app.Options) { o.RegistrationGrace = -time.Second }, "--registration-grace=-1s: must not be negative"},
		{"no history", func(o *app.Options) { o.History = 0 }, "--history=0: must be at least 1"},
		{"tiny watch buffer", func(o *app.Options) { o.WatchBuffer = 2 }, "--watch-buffer=2: must be at least 16"},
		{"fast bookmarks", func(o *app.Options) { o.BookmarkInterval = time.Millisecond }, "--watch-bookmark-interval=1ms"},
		{"bad router", func(o *app.Options) { o.Routers = []string{"r0=10.0.0.1"} }, `--routers="r0=10.0.0.1": address 10.0.0.1: missing port in address`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := defaults()
			tt.mod(&o)
			err := o.Validate()
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestParseRouters(t *testing.T) {
	tests := []struct {
		entry   string
		want    discoveryv1.Router
		wantErr string
	}{
		{entry: "router-0=10.0.0.1:8080", want: discoveryv1.Router{InstanceID: "router-0", Addresses: []string{"10.0.0.1"}, Ready: true, Ports: []discoveryv1.Port{{Name: "http", Port: 8080, Protocol: "TCP"}}}},
		{entry: "r1=[fd00::1]:9000?cluster=east&region=eu-west-1&zone=eu-west-1a&port-name=grpc&protocol=TCP", want: discoveryv1.Router{
			InstanceID: "r1", Addresses: []string{"fd00::1"}, Cluster: "east", Region: "eu-west-1", Zone: "eu-west-1a", Ready: true,
			Ports: []discoveryv1.Port{{Name: "grpc", Port: 9000, Protocol: "TCP"}},
		}},
		{entry: "10.0.0.1:8080", wantErr: "want INSTANCE=ADDRESS:PORT"},
		{entry: "r=router.local:80", wantErr: `"router.local" is not an IP address`},
		{entry: "r=10.0.0.1:0", wantErr: `port "0" is not from 1 to 65535`},
		{entry: "r=10.0.0.1:80?colour=red", wantErr: `unknown key "colour"`},
		{entry: "r=10.0.0.1:80?region=eu%20west", wantErr: `region "eu west"`},
		{entry: "r=10.0.0.1:80?protocol=tcp", wantErr: `protocol "tcp": must be TCP, UDP or SCTP`},
	}
	for _, tt := range tests {
		t.Run(tt.entry, func(t *testing.T) {
			got, err := app.ParseRouters([]string{tt.entry})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "--routers=") {
					t.Errorf("ParseRouters() = %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]discoveryv1.Router{tt.want}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, err := app.ParseRouters([]string{"r=10.0.0.1:80", "r=10.0.0.2:80"}); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("a repeated instance: %v", err)
	}
}

// The process as main runs it: TLS from files, tokens and client
// certificates, registrations and a watch through the Go client, probes,
// metrics, and a shutdown that ends open watches.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("fleet")
	if err != nil {
		t.Fatal(err)
	}
	serving, _ := ca.ServingCert("discovery", []string{"127.0.0.1"})
	router := discoverytest.ClientCert(t, ca, "router", discoveryv1.OrganizationRead)
	for name, kp := range map[string]*pki.KeyPair{"ca": ca, "discovery": serving} {
		if err := kp.Write(dir, name); err != nil {
			t.Fatal(err)
		}
	}
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("# token,name,role\n"+discoverytest.RegisterToken+",model-servers,register\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := defaults()
	o.Listen, o.MetricsAddr, o.HealthAddr = testkit.FreeAddr(t), testkit.FreeAddr(t), testkit.FreeAddr(t)
	o.TokensFile, o.ClientCAFile = tokens, filepath.Join(dir, "ca.crt")
	o.TLSCertFile, o.TLSKeyFile = filepath.Join(dir, "discovery.crt"), filepath.Join(dir, "discovery.key")
	o.RegistrationGrace = time.Hour
	o.Routers = []string{"router-0=10.9.0.1:8080?cluster=east&region=eu-west-1"}

	ctx, cancel := context.WithCancel(context.Background())
	var runErr error
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		runErr = app.Run(ctx, o, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})

	httpClient := func(cert *pki.KeyPair) *http.Client {
		var c *tls.Certificate
		if cert != nil {
			tc, err := cert.TLSCertificate()
			if err != nil {
				t.Fatal(err)
			}
			c = &tc
		}
		cfg, err := pki.ClientTLS(ca.CertPEM, c)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	base := "https://" + o.Listen
	registrar, _ := client.New(client.Options{BaseURL: base, HTTPClient: httpClient(nil), Token: discoverytest.RegisterToken})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	reader, _ := client.New(client.Options{BaseURL: base, HTTPClient: httpClient(router), MinBackoff: 10 * time.Millisecond, Log: quiet})

	get := func(addr, path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	testkit.Until(t, 10*time.Second, "/healthz", func() bool { status, _ := get(o.HealthAddr, "/healthz"); return status == 200 })
	if status, body := get(o.HealthAddr, "/readyz"); status != http.StatusServiceUnavailable || !strings.Contains(body, "no registrations yet") {
		t.Errorf("/readyz before a registration: %d %s", status, body)
	}

	// A watch opened now waits for the first registration.
	events := make(chan discoveryv1.Event, 100)
	watchDone := make(chan error, 1)
	watchCtx, stopWatch := context.WithCancel(context.Background())
	t.Cleanup(func() { stopWatch(); <-watchDone })
	go func() {
		watchDone <- reader.Watch(watchCtx, client.WatchOptions{}, func(e discoveryv1.Event) error {
			events <- e
			return nil
		})
	}()
	if _, err := registrar.Register(ctx, discoverytest.Registration("demo", "echo", "east", "eu-west-1", "e1")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []discoveryv1.EventType{discoveryv1.EventSnapshot, discoveryv1.EventSynced} {
		select {
		case e := <-events:
			if e.Type != want {
				t.Fatalf("event %s, want %s", e.Type, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s event", want)
		}
	}
	if status, body := get(o.HealthAddr, "/readyz"); status != 200 {
		t.Errorf("/readyz after a registration: %d %s", status, body)
	}
	routers, err := reader.Routers(ctx)
	if err != nil || len(routers.Routers) != 1 || routers.Routers[0].Region != "eu-west-1" {
		t.Errorf("routers: %+v %v", routers, err)
	}
	if _, err := reader.Register(ctx, discoverytest.Registration("demo", "echo", "east", "", "e2")); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("registering with a read certificate: %v", err)
	}
	if status, body := get(o.MetricsAddr, "/metrics"); status != 200 || !strings.Contains(body, "fleetnet_discovery_pools 1") || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics: %d\n%.500s", status, body)
	}

	// Shutdown ends the watch; the client goes on trying to resume.
	cancel()
	select {
	case <-finished:
		if runErr != nil {
			t.Errorf("Run: %v", runErr)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return with a watch open")
	}
	select {
	case err := <-watchDone:
		t.Errorf("the client's watch ended: %v", err)
	default:
	}
}

// TestRunKubernetes: the process with --pool-source=kubernetes, a
// kubeconfig and its context, as the dev fleet runs it on the hub: ready
// once the caches synced, the imported pool served, registrations refused
// (501), router replicas from --routers-service. Runs a real API server
// (test/fleet): take the fleet lock on a small machine.
func TestRunKubernetes(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "hub"}}})
	hub := f.Cluster(t, "hub")
	kc := hub.Clientset(t)
	for _, n := range []string{"demo", "routing"} {
		if _, err := kc.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*k8sdiscoveryv1.EndpointSlice{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "echo-east", Labels: map[string]string{
				mcsv1beta1.LabelServiceName: "echo", mcsv1beta1.LabelSourceCluster: "east", corev1.LabelTopologyRegion: "eu-west-1",
			}},
			AddressType: k8sdiscoveryv1.AddressTypeIPv4,
			Endpoints:   []k8sdiscoveryv1.Endpoint{{Addresses: []string{"10.244.1.5"}}},
		},
		{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "routing", Name: "router-abcde", Labels: map[string]string{k8sdiscoveryv1.LabelServiceName: "router"}},
			AddressType: k8sdiscoveryv1.AddressTypeIPv4,
			Endpoints:   []k8sdiscoveryv1.Endpoint{{Addresses: []string{"10.244.0.7"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "router-0"}}},
		},
	} {
		if _, err := kc.DiscoveryV1().EndpointSlices(s.Namespace).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := controlplane.WriteKubeconfig(kubeconfig, map[string]*rest.Config{"hub": hub.Config, "other": {Host: "https://127.0.0.1:1"}}, "other"); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(discoverytest.ReadToken+",router,read\n"+discoverytest.RegisterToken+",servers,register\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := defaults()
	o.Listen, o.MetricsAddr, o.HealthAddr = testkit.FreeAddr(t), testkit.FreeAddr(t), testkit.FreeAddr(t)
	o.TokensFile, o.PoolSource, o.Kubeconfig, o.Context = tokens, "kubernetes", kubeconfig, "hub"
	o.RoutersService, o.ClusterName = "routing/router", "hub"
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan error, 1)
	go func() { finished <- app.Run(ctx, o, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	t.Cleanup(func() {
		cancel()
		if err := <-finished; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	testkit.Until(t, 10*time.Second, "/readyz", func() bool {
		resp, err := http.Get("http://" + o.HealthAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	c, _ := client.New(client.Options{BaseURL: "http://" + o.Listen, Token: discoverytest.ReadToken})
	p, err := c.GetPool(ctx, "demo", "echo")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Clusters) != 1 || p.Clusters[0].Region != "eu-west-1" || p.Clusters[0].Endpoints[0].InstanceID != "east/10.244.1.5" || !p.Clusters[0].Endpoints[0].Ready {
		t.Errorf("pool demo/echo: %+v", p)
	}
	routers, err := c.Routers(ctx)
	if err != nil || len(routers.Routers) != 1 || routers.Routers[0].InstanceID != "router-0" || routers.Routers[0].Cluster != "hub" {
		t.Errorf("routers: %+v %v", routers, err)
	}
	registrar, _ := client.New(client.Options{BaseURL: "http://" + o.Listen, Token: discoverytest.RegisterToken})
	if _, err := registrar.Register(ctx, discoverytest.Registration("demo", "echo", "east", "", "e1")); err == nil || !strings.Contains(err.Error(), "501") {
		t.Errorf("registering with the kubernetes source: %v, want 501", err)
	}
}

// TestRunRegistry: the process with --pool-source=registry and an admin
// client certificate, against a real registry on loopback: ready at the
// registry's snapshot, the exported Pod's name as the instance id, static
// --routers served.
func TestRunRegistry(t *testing.T) {
	r := registrytest.Start(t, registryserver.Config{})
	east := r.Client("east", false)
	ctx := t.Context()
	if _, err := east.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: "east", ClustersetId: "fleet", Region: "eu-west-1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := east.PutExport(ctx, &registryv1.PutExportRequest{Export: &registryv1.Export{
		Key: &registryv1.ExportKey{Namespace: "demo", Name: "echo", ClusterId: "east"}, ExportedSince: timestamppb.Now(), Type: "ClusterSetIP",
		Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}, IpFamilies: []string{"IPv4"}, Weight: 1,
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := east.PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: &registryv1.EndpointChunk{
		Key: &registryv1.ChunkKey{Namespace: "demo", Name: "echo", ClusterId: "east", Chunk: "echo-abcde"}, AddressType: "IPv4",
		Ports:     []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}},
		Endpoints: []*registryv1.Endpoint{{Addresses: []string{"10.244.1.5"}, PodName: "echo-7c9d-x2k4p", Conditions: &registryv1.EndpointConditions{Ready: true, Serving: true}}},
	}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(discoverytest.ReadToken+",router,read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := defaults()
	o.Listen, o.MetricsAddr, o.HealthAddr = testkit.FreeAddr(t), testkit.FreeAddr(t), testkit.FreeAddr(t)
	o.TokensFile, o.PoolSource, o.Registry = tokens, "registry", r.ClientOptions("discovery", true)
	o.Routers = []string{"router-0=10.9.0.1:8080?cluster=east"}
	runCtx, cancel := context.WithCancel(context.Background())
	finished := make(chan error, 1)
	go func() { finished <- app.Run(runCtx, o, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	t.Cleanup(func() {
		cancel()
		if err := <-finished; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	testkit.Until(t, 10*time.Second, "/readyz", func() bool {
		resp, err := http.Get("http://" + o.HealthAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	c, _ := client.New(client.Options{BaseURL: "http://" + o.Listen, Token: discoverytest.ReadToken})
	p, err := c.GetPool(ctx, "demo", "echo")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Clusters) != 1 || p.Clusters[0].Region != "eu-west-1" || p.Clusters[0].Endpoints[0].InstanceID != "echo-7c9d-x2k4p" {
		t.Errorf("pool demo/echo: %+v", p)
	}
	if routers, err := c.Routers(ctx); err != nil || len(routers.Routers) != 1 {
		t.Errorf("routers: %+v %v", routers, err)
	}
}
