package kubesource_test

// These tests run the source against a real kube-apiserver and etcd
// (test/fleet; binaries from `make tools`), with imported EndpointSlices
// written by hand as the agent, or Karmada, would. Run them with the fleet
// lock on a small machine:
//
//	flock -o /tmp/fleetnet-fleet.lock go test ./internal/discovery/kubesource/...

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/discovery/kubesource"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	k8sdiscoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
)

const ns = "demo"

// role is all the source needs: list and watch EndpointSlices and
// ServiceImports (as internal/discovery/kubesource/rbac.go says).
func role() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "fleetnet-discovery"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"multicluster.x-k8s.io"}, Resources: []string{"serviceimports"}, Verbs: []string{"list", "watch"}},
		},
	}
}

// env is a source running against one cluster.
type env struct {
	st   *store.Store
	src  *kubesource.Source
	kube kubernetes.Interface // as admin, to write slices
}

// start runs the source as a ServiceAccount holding only role, against
// cfg's server (host overrides it, for a proxy).
func start(t testing.TB, c *fleet.Cluster, sel kubesource.Selection, routers store.Key, host string) *env {
	t.Helper()
	cfg := rest.CopyConfig(c.AsServiceAccount(t, "fleetnet-system", "fleetnet-discovery", role()))
	if host != "" {
		cfg.Host = host
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := mcsclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(store.Options{Base: 100})
	src, err := kubesource.New(kubesource.Config{
		Client: kc, MCSClient: mc, Store: st, Selection: sel, RoutersService: routers, Cluster: c.Name,
		Log: logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-src.Synced():
	case <-time.After(30 * time.Second):
		t.Fatalf("not synced after 30s: %s", src.Status())
	}
	return &env{st: st, src: src, kube: c.Clientset(t)}
}

// logger logs to the test, or nowhere for a benchmark.
func logger(t testing.TB) *slog.Logger {
	if _, ok := t.(*testing.B); ok {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, nil))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func mcsSlice(name, svc, cluster, region string, eps ...k8sdiscoveryv1.Endpoint) *k8sdiscoveryv1.EndpointSlice {
	l := map[string]string{
		k8sdiscoveryv1.LabelServiceName: keys.DerivedServicePrefix + "0123456789",
		mcsv1beta1.LabelServiceName:     svc,
		mcsv1beta1.LabelSourceCluster:   cluster,
		k8sdiscoveryv1.LabelManagedBy:   keys.EndpointSliceManagedBy,
	}
	if region != "" {
		l[corev1.LabelTopologyRegion] = region
	}
	return &k8sdiscoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l},
		AddressType: k8sdiscoveryv1.AddressTypeIPv4,
		Ports:       []k8sdiscoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
		Endpoints:   eps,
	}
}

func ep(addr string, ready *bool) k8sdiscoveryv1.Endpoint {
	return k8sdiscoveryv1.Endpoint{Addresses: []string{addr}, Conditions: k8sdiscoveryv1.EndpointConditions{Ready: ready}}
}

func (e *env) create(t testing.TB, objs ...*k8sdiscoveryv1.EndpointSlice) {
	t.Helper()
	for _, o := range objs {
		if _, err := e.kube.DiscoveryV1().EndpointSlices(o.Namespace).Create(t.Context(), o, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating EndpointSlice %s: %v", o.Name, err)
		}
	}
}

func createNamespace(t testing.TB, c *fleet.Cluster, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := c.Clientset(t).CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// summary is a pool as "cluster(region): id ready, ..." per cluster.
func summary(p *discoveryv1.Pool) string {
	if p == nil {
		return "<none>"
	}
	var parts []string
	for _, c := range p.Clusters {
		var eps []string
		for _, e := range c.Endpoints {
			state := "ready"
			if !e.Ready {
				state = "not-ready"
			}
			eps = append(eps, e.InstanceID+" "+state)
		}
		parts = append(parts, fmt.Sprintf("%s(%s): %s", c.Cluster, c.Region, strings.Join(eps, ", ")))
	}
	return strings.Join(parts, "; ")
}

// waitPool polls the store until pool k summarizes as want.
func (e *env) waitPool(t *testing.T, k store.Key, want string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("pool %s %q", k, want), func(context.Context) error {
		p, _ := e.st.Get(k)
		if got := summary(p); got != want {
			return fmt.Errorf("pool %s is %q, want %q", k, got, want)
		}
		return nil
	})
}

// TestImportedSlices: the slices of two source clusters make one pool per
// import, the cluster's own Service is not served, a watch sees an
// endpoint added and a slice removed as deltas, removing the last slice
// deletes the pool, a ServiceImport's labels become its pool's, and the
// router replicas follow their Service.
func TestImportedSlices(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "hub"}}})
	hub := f.Cluster(t, "hub")
	createNamespace(t, hub, ns, "routing")
	admin := &env{kube: hub.Clientset(t)}
	east := mcsSlice("web-east", "web", "east", "eu-west", ep("10.244.1.5", nil), ep("10.244.1.6", ptr.To(false)))
	admin.create(t,
		east,
		mcsSlice("web-west", "web", "west", "us-west", ep("10.244.2.5", ptr.To(true))),
		mcsSlice("db-west", "db", "west", "", ep("10.244.2.9", nil)),
		// The cluster's own Service: not imported, not served.
		&k8sdiscoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "local-abcde", Labels: map[string]string{k8sdiscoveryv1.LabelServiceName: "local"}},
			AddressType: k8sdiscoveryv1.AddressTypeIPv4, Endpoints: []k8sdiscoveryv1.Endpoint{ep("10.244.0.9", nil)},
		},
		&k8sdiscoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "routing", Name: "router-abcde", Labels: map[string]string{k8sdiscoveryv1.LabelServiceName: "router"}},
			AddressType: k8sdiscoveryv1.AddressTypeIPv4,
			Ports:       []k8sdiscoveryv1.EndpointPort{{Name: ptr.To("grpc"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](9000)}},
			Endpoints: []k8sdiscoveryv1.Endpoint{{Addresses: []string{"10.244.0.20"}, Zone: ptr.To("hub-a"),
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "routing", Name: "router-6f7c-abcde"}}},
		},
	)
	e := start(t, hub, kubesource.SelectionMCS, store.Key{Namespace: "routing", Name: "router"}, "")

	// The whole state is in the store when Synced closes.
	rev, pools := e.st.List(nil)
	var got []string
	for _, p := range pools {
		got = append(got, p.Namespace+"/"+p.Name+" "+summary(p))
	}
	want := []string{
		"demo/db west(): west/10.244.2.9 ready",
		"demo/web east(eu-west): east/10.244.1.5 ready, east/10.244.1.6 not-ready; west(us-west): west/10.244.2.5 ready",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pools at sync (-want +got):\n%s", diff)
	}
	wantRouters := []discoveryv1.Router{{InstanceID: "router-6f7c-abcde", Addresses: []string{"10.244.0.20"}, Cluster: "hub", Zone: "hub-a", Ready: true,
		Ports: []discoveryv1.Port{{Name: "grpc", Port: 9000, Protocol: "TCP"}}}}
	if diff := cmp.Diff(wantRouters, e.src.Routers()); diff != "" {
		t.Errorf("routers (-want +got):\n%s", diff)
	}

	w, initial := e.st.Watch(rev)
	t.Cleanup(w.Stop)
	if len(initial) != 0 {
		t.Fatalf("a watch from the current revision got %d events", len(initial))
	}
	next := func(what string) *discoveryv1.Event {
		t.Helper()
		select {
		case ev := <-w.C():
			return &ev.Event
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no watch event within 10s", what)
			return nil
		}
	}
	web := store.Key{Namespace: ns, Name: "web"}

	// A watch delta: an endpoint added to east.
	east.Endpoints = append(east.Endpoints, ep("10.244.1.7", nil))
	if _, err := admin.kube.DiscoveryV1().EndpointSlices(ns).Update(t.Context(), east, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := next("endpoint added")
	if ev.Type != discoveryv1.EventUpsert || summary(ev.Pool) != "east(eu-west): east/10.244.1.5 ready, east/10.244.1.6 not-ready, east/10.244.1.7 ready; west(us-west): west/10.244.2.5 ready" {
		t.Errorf("after an endpoint was added: %s %s", ev.Type, summary(ev.Pool))
	}

	// Removal of a slice: west leaves the pool.
	if err := admin.kube.DiscoveryV1().EndpointSlices(ns).Delete(t.Context(), "web-west", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ev = next("slice removed")
	if ev.Type != discoveryv1.EventUpsert || summary(ev.Pool) != "east(eu-west): east/10.244.1.5 ready, east/10.244.1.6 not-ready, east/10.244.1.7 ready" {
		t.Errorf("after west's slice was removed: %s %s", ev.Type, summary(ev.Pool))
	}

	// The last slice of db: the pool goes.
	if err := admin.kube.DiscoveryV1().EndpointSlices(ns).Delete(t.Context(), "db-west", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ev = next("last slice removed")
	if ev.Type != discoveryv1.EventDelete || ev.Pool.Name != "db" {
		t.Errorf("after db's last slice was removed: %s %s", ev.Type, ev.Pool.Name)
	}
	if _, ok := e.st.Get(store.Key{Namespace: ns, Name: "db"}); ok {
		t.Error("pool demo/db is still served")
	}

	// A slice whose labels move it to another pool leaves the first.
	moved, err := admin.kube.DiscoveryV1().EndpointSlices(ns).Get(t.Context(), "web-east", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	moved.Labels[mcsv1beta1.LabelServiceName] = "api"
	if _, err := admin.kube.DiscoveryV1().EndpointSlices(ns).Update(t.Context(), moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	api0 := store.Key{Namespace: ns, Name: "api"}
	e.waitPool(t, web, "<none>")
	e.waitPool(t, api0, "east(eu-west): east/10.244.1.5 ready, east/10.244.1.6 not-ready, east/10.244.1.7 ready")

	// The ServiceImport's labels become the pool's (the agent's own
	// managed-by label is no exporter's and is left out).
	api := store.Key{Namespace: ns, Name: "api"}
	si := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api", Labels: map[string]string{"tier": "backend", keys.LabelManagedBy: keys.ManagedByAgent}},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	if err := hub.Client(t).Create(t.Context(), si); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("pool %s's labels", api), func(context.Context) error {
		p, _ := e.st.Get(api)
		if p == nil || !cmp.Equal(p.Labels, map[string]string{"tier": "backend"}) {
			return fmt.Errorf("pool %s labels: %v", api, p)
		}
		return nil
	})

	// Router replicas follow their Service.
	admin.create(t, &k8sdiscoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "routing", Name: "router-fghij", Labels: map[string]string{k8sdiscoveryv1.LabelServiceName: "router"}},
		AddressType: k8sdiscoveryv1.AddressTypeIPv4,
		Endpoints:   []k8sdiscoveryv1.Endpoint{{Addresses: []string{"10.244.0.21"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "router-6f7c-fghij"}}},
	})
	testkit.Eventually(t, 10*time.Second, "2 router replicas", func(context.Context) error {
		if n := len(e.src.Routers()); n != 2 {
			return fmt.Errorf("%d router replicas, want 2", n)
		}
		return nil
	})
}

// TestKarmadaSlices: EndpointSlices built by hand as Karmada derives them
// for a ServiceImport (and dispatches them for a MultiClusterService) are
// served with their source clusters; one whose cluster cannot be told is
// left out, and the others still served.
func TestKarmadaSlices(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "member3"}}})
	c := f.Cluster(t, "member3")
	createNamespace(t, c, ns)
	karmada := func(name, svc, workNamespace string, eps ...k8sdiscoveryv1.Endpoint) *k8sdiscoveryv1.EndpointSlice {
		s := &k8sdiscoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
				k8sdiscoveryv1.LabelServiceName: keys.KarmadaDerivedServicePrefix + svc,
				k8sdiscoveryv1.LabelManagedBy:   keys.KarmadaEndpointSliceManagedBy,
			}},
			AddressType: k8sdiscoveryv1.AddressTypeIPv4,
			Ports:       []k8sdiscoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](80)}},
			Endpoints:   eps,
		}
		if workNamespace != "" {
			s.Annotations = map[string]string{keys.KarmadaAnnotationWorkNamespace: workNamespace}
		}
		return s
	}
	admin := &env{kube: c.Clientset(t)}
	admin.create(t,
		karmada("imported-member1-serve-x7k2p", "serve", "karmada-es-member3", ep("10.10.0.5", nil)),
		// A cluster name with a dash, named by the control plane's annotation.
		karmada("imported-eu-2-serve-m4n5b", "serve", "karmada-es-eu-2", ep("10.12.0.5", ptr.To(false))),
		// Whose cluster cannot be told: not served.
		karmada("imported-q9z8w", "serve", "", ep("10.13.0.5", nil)),
		&k8sdiscoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "member2-api-abcde",
				Labels: map[string]string{
					k8sdiscoveryv1.LabelServiceName: "api", k8sdiscoveryv1.LabelManagedBy: keys.KarmadaDispatchEndpointSliceManagedBy,
					corev1.LabelTopologyRegion: "cn-north-1",
				},
				Annotations: map[string]string{keys.KarmadaAnnotationProvisionCluster: "member2"}},
			AddressType: k8sdiscoveryv1.AddressTypeIPv4,
			Endpoints:   []k8sdiscoveryv1.Endpoint{ep("10.11.0.7", nil)},
		},
		// fleetnet's own imported slices are not Karmada's.
		mcsSlice("web-east", "web", "east", "", ep("10.244.1.5", nil)),
	)
	e := start(t, c, kubesource.SelectionKarmada, store.Key{}, "")
	_, pools := e.st.List(nil)
	var got []string
	for _, p := range pools {
		got = append(got, p.Namespace+"/"+p.Name+" "+summary(p))
	}
	want := []string{
		"demo/api member2(cn-north-1): member2/10.11.0.7 ready",
		"demo/serve eu-2(): eu-2/10.12.0.5 not-ready; member1(): member1/10.10.0.5 ready",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
	if st := e.src.Status(); !strings.Contains(st, "1 slices not served") {
		t.Errorf("Status() = %q, want it to count the slice not served", st)
	}
}

// TestLostWatchKeepsPools: while the API server cannot be reached, the
// source keeps serving what it had and stays synced; a slice deleted
// meanwhile goes once the API server is back.
func TestLostWatchKeepsPools(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "hub"}}})
	hub := f.Cluster(t, "hub")
	createNamespace(t, hub, ns)
	u, err := url.Parse(hub.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, u.Host)
	admin := &env{kube: hub.Clientset(t)}
	admin.create(t,
		mcsSlice("web-east", "web", "east", "", ep("10.244.1.5", nil)),
		mcsSlice("web-west", "web", "west", "", ep("10.244.2.5", nil)),
	)
	e := start(t, hub, kubesource.SelectionMCS, store.Key{}, "https://"+p.addr)
	web := store.Key{Namespace: ns, Name: "web"}
	both := "east(): east/10.244.1.5 ready; west(): west/10.244.2.5 ready"
	e.waitPool(t, web, both)
	rev := e.st.Revision()

	refusedBefore := p.down()
	if err := admin.kube.DiscoveryV1().EndpointSlices(ns).Delete(t.Context(), "web-west", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The source has noticed: it tried to reach the API server again and
	// was refused.
	testkit.Eventually(t, 30*time.Second, "the source to try to reconnect", func(context.Context) error {
		if n := p.refused(); n <= refusedBefore {
			return errors.New("the source has not tried to reconnect yet")
		}
		return nil
	})
	if got, _ := e.st.Get(web); summary(got) != both || e.st.Revision() != rev {
		t.Errorf("while the API server is away: pool %q at revision %d, want %q unchanged at %d", summary(got), e.st.Revision(), both, rev)
	}
	select {
	case <-e.src.Synced():
	default:
		t.Error("the source says it is not synced while the API server is away")
	}

	p.up()
	e.waitPool(t, web, "east(): east/10.244.1.5 ready")
}

// proxy forwards TCP connections to an address until it is taken down;
// down, it cuts every connection and refuses new ones.
type proxy struct {
	addr, target string
	mu           sync.Mutex
	isDown       bool
	conns        map[net.Conn]bool
	refusals     int
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() {
		ln.Close()
		p.down()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *proxy) serve(c net.Conn) {
	p.mu.Lock()
	if p.isDown {
		p.refusals++
		p.mu.Unlock()
		c.Close()
		return
	}
	p.mu.Unlock()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go func() {
		_, _ = io.Copy(up, c)
		up.Close()
	}()
	_, _ = io.Copy(c, up)
	c.Close()
}

// down cuts every connection and returns how many were refused so far.
func (p *proxy) down() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isDown = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	return p.refusals
}

func (p *proxy) up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isDown = false
}

func (p *proxy) refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refusals
}

// BenchmarkSyncAndChange measures the source on a real API server holding
// 100 imported Services from 10 clusters each, 10 endpoints per slice
// (1,000 slices, 10,000 endpoints): the time from the start to Synced (the
// list, the cache and the store written), the heap after it, and per
// iteration the time from an API write (one endpoint's readiness flipped)
// to the store's event for its pool. Run with a fixed count, as each round
// starts a cluster:
//
//	flock -o /tmp/fleetnet-fleet.lock go test ./internal/discovery/kubesource -run '^$' -bench SyncAndChange -benchtime 200x
func BenchmarkSyncAndChange(b *testing.B) {
	const pools, clusters, perSlice = 100, 10, 10
	f := fleet.Start(b, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "hub"}}})
	hub := f.Cluster(b, "hub")
	createNamespace(b, hub, ns)
	cfg := rest.CopyConfig(hub.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	kc := kubernetes.NewForConfigOrDie(cfg)
	var wg sync.WaitGroup
	work := make(chan *k8sdiscoveryv1.EndpointSlice)
	errs := make(chan error, 1)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				if _, err := kc.DiscoveryV1().EndpointSlices(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for p := range pools {
		for c := range clusters {
			var eps []k8sdiscoveryv1.Endpoint
			for i := range perSlice {
				eps = append(eps, ep(fmt.Sprintf("10.%d.%d.%d", 100+c, p, i+1), nil))
			}
			work <- mcsSlice(fmt.Sprintf("svc-%d-c%d", p, c), fmt.Sprintf("svc-%d", p), fmt.Sprintf("c%d", c), fmt.Sprintf("region-%d", c%3), eps...)
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	started := time.Now()
	e := start(b, hub, kubesource.SelectionMCS, store.Key{}, "")
	syncTime := time.Since(started)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if st := e.st.Stats(); st.Pools != pools || st.Endpoints != pools*clusters*perSlice {
		b.Fatalf("after sync: %d pools, %d endpoints", st.Pools, st.Endpoints)
	}

	w, _ := e.st.Watch(e.st.Revision())
	defer w.Stop()
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		name := fmt.Sprintf("svc-%d-c%d", i%pools, (i/pools)%clusters)
		s, err := kc.DiscoveryV1().EndpointSlices(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		s.Endpoints[0].Conditions.Ready = ptr.To(!ptr.Deref(s.Endpoints[0].Conditions.Ready, true))
		t0 := time.Now()
		if _, err := kc.DiscoveryV1().EndpointSlices(ns).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		want := s.Labels[mcsv1beta1.LabelServiceName]
		for {
			select {
			case ev := <-w.C():
				if ev.Pool.Name != want {
					continue
				}
			case <-time.After(10 * time.Second):
				b.Fatalf("no event for %s", want)
			}
			break
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(syncTime.Milliseconds()), "sync-ms")
	b.ReportMetric(float64(after.HeapAlloc-min(before.HeapAlloc, after.HeapAlloc))/(1<<20), "heap-MiB")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "change-p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "change-p99-ms")
}
