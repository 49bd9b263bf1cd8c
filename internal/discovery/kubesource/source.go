// Package kubesource is fleetnet-discovery's "kubernetes" pool source: the
// imported EndpointSlices of one cluster, read through informers, become
// pools (one per imported Service) with their endpoints grouped by source
// cluster, labelled with their ServiceImport's labels. Slices are selected by the Multi-Cluster Services API's labels,
// as fleetnet's agent and other MCS implementations write them, or by
// Karmada's (see Selection). Router replicas come from the EndpointSlices
// of a named Service of the same cluster.
//
// The imports of one cluster carry no export's scope (fleetnet.dev/export-to
// and its selector decide what that cluster was sent, not what another may
// see): the pools go to callers that see every pool (administrators, and
// discovery's read and register identities), and the server refuses
// callers that are clusters (ClusterRefusal).
//
// The source is level-based: every change of a slice recomputes its pool
// from the informer's cache and hands it whole to the store. The store is
// first written once the caches have synced; a broken watch keeps the
// cache (the informer relists and resumes by itself), so what is served
// stays as it was until the API server says otherwise (fail static).
package kubesource

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
	"github.com/fleetnet/fleetnet/internal/registry/view"
	"github.com/prometheus/client_golang/prometheus"
	k8sdiscoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
)

// SourceName is the name under which the source contributes to the store.
const SourceName = "kubernetes"

// poolIndex indexes the slice cache by pool key.
const poolIndex = "pool"

// Config configures a Source.
type Config struct {
	Client kubernetes.Interface
	// MCSClient, when set, reads the ServiceImports, whose labels (the
	// exporters' spec.exportedLabels) become the pools' labels; nil serves
	// pools without labels.
	MCSClient mcsclient.Interface
	Store     *store.Store
	Selection Selection
	// RoutersService is the Service whose EndpointSlices are the router
	// replicas; a zero key serves none.
	RoutersService store.Key
	// Cluster is the name of the cluster read, given to the router
	// replicas; may be empty.
	Cluster string
	Log     *slog.Logger
	// Registerer receives the source's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Source feeds the store from imported EndpointSlices.
type Source struct {
	cfg     Config
	factory informers.SharedInformerFactory
	slices  cache.SharedIndexInformer
	synced  []cache.InformerSynced

	routerFactory  informers.SharedInformerFactory
	routerInformer cache.SharedIndexInformer

	importsInformer cache.SharedIndexInformer

	kick     chan struct{}
	syncedCh chan struct{}

	mu sync.Mutex
	// dirty holds the pools to recompute.
	dirty map[store.Key]bool
	// poolOf is the pool each cached slice (namespace/name) counts in.
	poolOf map[string]store.Key
	// skipped holds why a slice is not served, by slice, so that each
	// reason is logged once.
	skipped      map[string]string
	routersDirty bool
	routers      []discoveryv1.Router
	// served holds the pools the source contributes.
	served map[store.Key]bool
}

// RESTConfig loads the kubeconfig at path (with its context, when given),
// or with an empty path the in-cluster configuration, then $KUBECONFIG and
// ~/.kube/config, as kubectl does.
func RESTConfig(path, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		if path == "" {
			return nil, fmt.Errorf("loading the in-cluster or default kubeconfig: %w", err)
		}
		return nil, fmt.Errorf("loading kubeconfig %s (context %q): %w", path, context, err)
	}
	cfg.UserAgent = "fleetnet-discovery"
	// EndpointSlices are a built-in type: protobuf is smaller and faster
	// to decode than JSON.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return cfg, nil
}

// New builds the informers; Run starts them.
func New(cfg Config) (*Source, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if !slices.Contains(Selections, cfg.Selection) {
		return nil, fmt.Errorf("slice selection %q: one of %v", cfg.Selection, Selections)
	}
	s := &Source{
		cfg: cfg, kick: make(chan struct{}, 1), syncedCh: make(chan struct{}),
		dirty: map[store.Key]bool{}, served: map[store.Key]bool{}, poolOf: map[string]store.Key{}, skipped: map[string]string{},
	}
	sel := cfg.Selection
	// No resync: the pools follow events, and a resync would only
	// recompute what has not changed.
	s.factory = informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel.LabelSelector() }),
		informers.WithTransform(trim))
	s.slices = s.factory.Discovery().V1().EndpointSlices().Informer()
	if err := s.slices.AddIndexers(cache.Indexers{poolIndex: func(obj any) ([]string, error) {
		es, ok := obj.(*k8sdiscoveryv1.EndpointSlice)
		if !ok {
			return nil, nil
		}
		o, err := sel.OriginOf(es)
		if err != nil {
			return nil, nil // not served; logged by the handler
		}
		return []string{o.Pool.String()}, nil
	}}); err != nil {
		return nil, fmt.Errorf("indexing endpointslices: %w", err)
	}
	if err := s.slices.SetWatchErrorHandler(s.watchError("imported endpointslices")); err != nil {
		return nil, err
	}
	reg, err := s.slices.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.sliceChanged,
		UpdateFunc: func(_, obj any) { s.sliceChanged(obj) },
		DeleteFunc: s.sliceChanged,
	})
	if err != nil {
		return nil, fmt.Errorf("watching endpointslices: %w", err)
	}
	// A registration has synced once its handler has seen the first list,
	// which the informer's own HasSynced does not promise.
	s.synced = append(s.synced, reg.HasSynced)

	if cfg.RoutersService != (store.Key{}) {
		rs := cfg.RoutersService
		s.routerFactory = informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0,
			informers.WithNamespace(rs.Namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.LabelSelector = k8sdiscoveryv1.LabelServiceName + "=" + rs.Name
			}),
			informers.WithTransform(trim))
		s.routerInformer = s.routerFactory.Discovery().V1().EndpointSlices().Informer()
		if err := s.routerInformer.SetWatchErrorHandler(s.watchError("endpointslices of routers Service " + rs.String())); err != nil {
			return nil, err
		}
		reg, err := s.routerInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { s.routersChanged() },
			UpdateFunc: func(any, any) { s.routersChanged() },
			DeleteFunc: func(any) { s.routersChanged() },
		})
		if err != nil {
			return nil, fmt.Errorf("watching the routers' endpointslices: %w", err)
		}
		s.synced = append(s.synced, reg.HasSynced)
	}
	if cfg.MCSClient != nil {
		mc := cfg.MCSClient.MulticlusterV1beta1()
		s.importsInformer = cache.NewSharedIndexInformer(plainListWatch{&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return mc.ServiceImports(metav1.NamespaceAll).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return mc.ServiceImports(metav1.NamespaceAll).Watch(ctx, o)
			},
		}}, &mcsv1beta1.ServiceImport{}, 0, cache.Indexers{})
		if err := s.importsInformer.SetTransform(trim); err != nil {
			return nil, err
		}
		if err := s.importsInformer.SetWatchErrorHandler(s.watchError("serviceimports")); err != nil {
			return nil, err
		}
		reg, err := s.importsInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    s.importChanged,
			UpdateFunc: func(_, obj any) { s.importChanged(obj) },
			DeleteFunc: s.importChanged,
		})
		if err != nil {
			return nil, fmt.Errorf("watching serviceimports: %w", err)
		}
		s.synced = append(s.synced, reg.HasSynced)
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fleetnet_discovery_kubernetes_slices", Help: "Imported EndpointSlices in the cache, served or not."}, func() float64 {
				return float64(len(s.slices.GetStore().ListKeys()))
			}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fleetnet_discovery_kubernetes_slices_skipped", Help: "Imported EndpointSlices not served because their pool or source cluster cannot be told (logged with the reason)."}, func() float64 {
				s.mu.Lock()
				defer s.mu.Unlock()
				return float64(len(s.skipped))
			}),
		)
	}
	return s, nil
}

// plainListWatch opts the ServiceImport informer out of streaming lists
// (client-go's WatchListClient): for this custom resource the API server
// took about a second to start the stream on every start, against some
// 30 ms for a plain list and watch (kube-apiserver v1.36, measured with
// BenchmarkSyncAndChange and KUBE_FEATURE_WatchListClient=false).
type plainListWatch struct{ *cache.ListWatch }

// IsWatchListSemanticsUnSupported tells the reflector to list, then watch.
func (plainListWatch) IsWatchListSemanticsUnSupported() bool { return true }

// watchError logs a broken watch as the transient wait it is: the informer
// retries, and keeps its cache meanwhile.
func (s *Source) watchError(what string) cache.WatchErrorHandler {
	return func(_ *cache.Reflector, err error) {
		s.cfg.Log.Info("watch of "+what+" ended; serving what is cached and retrying", "err", err)
	}
}

// trim drops managed fields before an object is cached; they are often
// most of its size and never read. (Annotations stay: Karmada's slices
// name their source cluster in one.)
func trim(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

func (s *Source) sliceChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	es, ok := obj.(*k8sdiscoveryv1.EndpointSlice)
	if !ok {
		return
	}
	name := es.Namespace + "/" + es.Name
	_, exists, _ := s.slices.GetStore().Get(es)
	o, err := s.cfg.Selection.OriginOf(es)
	s.mu.Lock()
	if old, ok := s.poolOf[name]; ok {
		s.dirty[old] = true
		delete(s.poolOf, name)
	}
	switch {
	case !exists:
		delete(s.skipped, name)
	case err != nil:
		if s.skipped[name] != err.Error() {
			s.skipped[name] = err.Error()
			s.cfg.Log.Warn("imported EndpointSlice not served: its pool or source cluster cannot be told", "endpointslice", name, "selection", string(s.cfg.Selection), "err", err)
		}
	default:
		delete(s.skipped, name)
		s.poolOf[name] = o.Pool
		s.dirty[o.Pool] = true
	}
	s.mu.Unlock()
	s.poke()
}

// importChanged marks the pool of a ServiceImport: its labels may have
// changed.
func (s *Source) importChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.dirty[store.Key{Namespace: m.GetNamespace(), Name: m.GetName()}] = true
	s.mu.Unlock()
	s.poke()
}

func (s *Source) routersChanged() {
	s.mu.Lock()
	s.routersDirty = true
	s.mu.Unlock()
	s.poke()
}

func (s *Source) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Run starts the informers, writes the whole state into the store once
// their caches have synced, then every change, until ctx ends.
func (s *Source) Run(ctx context.Context) error {
	start := time.Now()
	s.factory.Start(ctx.Done())
	defer s.factory.Shutdown()
	if s.routerFactory != nil {
		s.routerFactory.Start(ctx.Done())
		defer s.routerFactory.Shutdown()
	}
	if s.importsInformer != nil {
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.importsInformer.RunWithContext(ctx)
		}()
		defer func() { <-done }()
	}
	// Polled every 10 ms rather than cache.WaitForCacheSync's 100 ms, so
	// that readiness follows the sync closely.
	tick := time.NewTicker(10 * time.Millisecond)
	for !s.cachesSynced() {
		select {
		case <-ctx.Done():
			tick.Stop()
			return nil
		case <-tick.C:
		}
	}
	tick.Stop()
	s.mu.Lock()
	clear(s.dirty)
	s.routersDirty = false
	s.mu.Unlock()
	pools := s.allPools()
	scoped := make([]store.Scoped, len(pools))
	for i, p := range pools {
		scoped[i] = store.Scoped{Pool: p, Audience: noCluster}
	}
	rev := s.cfg.Store.ReplaceSourceScoped(SourceName, scoped)
	s.updateRouters()
	s.mu.Lock()
	for _, p := range pools {
		s.served[store.Key{Namespace: p.Namespace, Name: p.Name}] = true
	}
	s.mu.Unlock()
	close(s.syncedCh)
	s.cfg.Log.Info("endpointslice caches synced", "after", time.Since(start).Round(time.Millisecond).String(),
		"pools", len(pools), "slices", len(s.slices.GetStore().ListKeys()), "selection", string(s.cfg.Selection), "revision", rev)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
		}
		s.flush()
	}
}

func (s *Source) cachesSynced() bool {
	for _, f := range s.synced {
		if !f() {
			return false
		}
	}
	return true
}

// flush recomputes the pools and routers that changed.
func (s *Source) flush() {
	s.mu.Lock()
	dirty := s.dirty
	s.dirty = map[store.Key]bool{}
	routers := s.routersDirty
	s.routersDirty = false
	s.mu.Unlock()
	for _, k := range slices.SortedFunc(maps.Keys(dirty), func(a, b store.Key) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	}) {
		before := s.cfg.Store.Revision()
		var rev int64
		p, ok := s.pool(k)
		s.mu.Lock()
		if ok {
			s.served[k] = true
		} else {
			delete(s.served, k)
		}
		s.mu.Unlock()
		if ok {
			rev = s.cfg.Store.ReplaceScoped(SourceName, p, noCluster)
		} else {
			rev = s.cfg.Store.Delete(SourceName, k)
		}
		if rev != before {
			s.cfg.Log.Info("pool changed", "pool", k.String(), "clusters", len(p.Clusters), "endpoints", countEndpoints(p), "revision", rev)
		}
	}
	if routers {
		s.updateRouters()
	}
}

// pool builds one pool from the cache; false when it has no slice.
func (s *Source) pool(k store.Key) (discoveryv1.Pool, bool) {
	objs, err := s.slices.GetIndexer().ByIndex(poolIndex, k.String())
	if err != nil || len(objs) == 0 {
		return discoveryv1.Pool{Namespace: k.Namespace, Name: k.Name}, false
	}
	var sl []*k8sdiscoveryv1.EndpointSlice
	var origins []Origin
	for _, obj := range objs {
		es := obj.(*k8sdiscoveryv1.EndpointSlice)
		o, err := s.cfg.Selection.OriginOf(es)
		if err != nil || o.Pool != k {
			continue
		}
		sl = append(sl, es)
		origins = append(origins, o)
	}
	if len(sl) == 0 {
		return discoveryv1.Pool{Namespace: k.Namespace, Name: k.Name}, false
	}
	return BuildPool(k, s.labels(k), sl, origins), true
}

// labels returns the labels of pool k's ServiceImport, if any.
func (s *Source) labels(k store.Key) map[string]string {
	if s.importsInformer == nil {
		return nil
	}
	obj, ok, err := s.importsInformer.GetStore().GetByKey(k.String())
	if err != nil || !ok {
		return nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	return m.GetLabels()
}

// allPools builds every pool in the cache.
func (s *Source) allPools() []discoveryv1.Pool {
	var out []discoveryv1.Pool
	for _, v := range s.slices.GetIndexer().ListIndexFuncValues(poolIndex) {
		ns, name, _ := cache.SplitMetaNamespaceKey(v)
		if p, ok := s.pool(store.Key{Namespace: ns, Name: name}); ok {
			out = append(out, p)
		}
	}
	// The handlers saw every slice of the first list: poolOf and skipped
	// are complete.
	return out
}

func (s *Source) updateRouters() {
	if s.routerInformer == nil {
		return
	}
	var sl []*k8sdiscoveryv1.EndpointSlice
	for _, obj := range s.routerInformer.GetStore().List() {
		sl = append(sl, obj.(*k8sdiscoveryv1.EndpointSlice))
	}
	r := Routers(s.cfg.Cluster, sl)
	s.mu.Lock()
	changed := len(r) != len(s.routers)
	s.routers = r
	s.mu.Unlock()
	if changed {
		s.cfg.Log.Info("router replicas changed", "service", s.cfg.RoutersService.String(), "routers", len(r))
	}
}

// noCluster is the audience of every pool of the source: no caller that is
// a cluster (see ClusterRefusal).
var noCluster = view.Only()

// ClusterRefusal says why callers that are clusters are refused: the
// imports read here are what one cluster was sent, and an export's scope
// is not among them, so what another cluster may see cannot be told.
func (s *Source) ClusterRefusal() string {
	in := "the cluster it reads"
	if s.cfg.Cluster != "" {
		in = "cluster " + s.cfg.Cluster
	}
	return fmt.Sprintf("this server's pools are the imports of %s (--pool-source=kubernetes), which carry no export's scope (fleetnet.dev/export-to), so what another cluster may see cannot be told; a cluster reads a server with --pool-source=registry, or its own imports", in)
}

// Routers returns the router replicas, sorted by instance id.
func (s *Source) Routers() []discoveryv1.Router {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.routers
}

// Synced is closed once the caches have synced and the store holds them.
func (s *Source) Synced() <-chan struct{} { return s.syncedCh }

// Status says what the source waits for, or what it serves.
func (s *Source) Status() string {
	select {
	case <-s.syncedCh:
	default:
		what := "EndpointSlice"
		if s.importsInformer != nil {
			what = "EndpointSlice and ServiceImport"
		}
		return fmt.Sprintf("waiting for the %s caches to sync (slice selector %q)", what, s.cfg.Selection.LabelSelector())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	msg := fmt.Sprintf("%d pools from imported EndpointSlices (selection %s)", len(s.served), s.cfg.Selection)
	if len(s.skipped) > 0 {
		msg += fmt.Sprintf("; %d slices not served, see the log", len(s.skipped))
	}
	if s.routerInformer != nil {
		msg += fmt.Sprintf("; %d router replicas from %s", len(s.routers), s.cfg.RoutersService)
	}
	return msg
}

func countEndpoints(p discoveryv1.Pool) int {
	n := 0
	for _, c := range p.Clusters {
		n += len(c.Endpoints)
	}
	return n
}
