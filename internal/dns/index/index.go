// Package index keeps the records of the clusterset zone in memory, by
// name. ServiceImport and imported EndpointSlice events rebuild the records
// of the one import they concern (zone.Build), so a query is a map read:
// no API call and no scan of a list per query.
package index

import (
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/fleetnet/fleetnet/internal/dns/zone"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Index holds the imports and their slices, and the records built from
// them. It implements zone.Lookup. Its methods are safe for concurrent
// use: informers of different kinds call the setters from their own
// goroutines while queries read.
type Index struct {
	log *slog.Logger
	now func() time.Time
	// OnChange, when set, is called after every change with the number of
	// imports and imported EndpointSlices held (metrics). It runs under
	// the index's lock, so it must not call back into the index.
	OnChange func(imports, slices int)

	mu sync.RWMutex
	// imports and slices are the inputs, as the informers hold them (never
	// modified here); slices by import, then by slice name.
	imports map[types.NamespacedName]*mcsv1beta1.ServiceImport
	slices  map[types.NamespacedName]map[string]*discoveryv1.EndpointSlice
	// sliceOwner is the import each slice is filed under, so that a slice
	// whose service-name label changes leaves its old import.
	sliceOwner map[types.NamespacedName]types.NamespacedName
	sliceCount int
	// services are the records of each import; namespaces count the imports
	// of each namespace (<ns>.svc.<zone> exists while one is there).
	services   map[types.NamespacedName]*zone.Service
	namespaces map[string]int
	serial     uint32
	// quiet holds back per-import logs during the informers' first list,
	// which would log every import of the cluster at start.
	quiet bool
}

var _ zone.Lookup = (*Index)(nil)

// New returns an empty index. now stamps the SOA serial (time.Now when
// nil); log receives a line per import added, changed or removed.
func New(log *slog.Logger, now func() time.Time) *Index {
	if log == nil {
		log = slog.Default()
	}
	if now == nil {
		now = time.Now
	}
	return &Index{
		log: log, now: now, quiet: true,
		imports:    map[types.NamespacedName]*mcsv1beta1.ServiceImport{},
		slices:     map[types.NamespacedName]map[string]*discoveryv1.EndpointSlice{},
		sliceOwner: map[types.NamespacedName]types.NamespacedName{},
		services:   map[types.NamespacedName]*zone.Service{},
		namespaces: map[string]int{},
		serial:     uint32(now().Unix()),
	}
}

// Service implements zone.Lookup.
func (ix *Index) Service(namespace, name string) *zone.Service {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.services[types.NamespacedName{Namespace: namespace, Name: name}]
}

// Namespace implements zone.Lookup.
func (ix *Index) Namespace(namespace string) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.namespaces[namespace] > 0
}

// Serial implements zone.Lookup: the Unix time of the last change, as
// CoreDNS's kubernetes plugin does.
func (ix *Index) Serial() uint32 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.serial
}

// Len returns how many imports and imported EndpointSlices the index holds.
func (ix *Index) Len() (imports, slices int) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.imports), ix.sliceCount
}

// Synced marks the end of the informers' first list: from now on each
// import added, changed or removed is logged.
func (ix *Index) Synced() {
	ix.mu.Lock()
	ix.quiet = false
	imports, slices := len(ix.imports), ix.sliceCount
	ix.mu.Unlock()
	ix.log.Info("clusterset DNS index synced", "imports", imports, "endpointSlices", slices)
}

// SetImport adds or replaces an import.
func (ix *Index) SetImport(si *mcsv1beta1.ServiceImport) {
	k := types.NamespacedName{Namespace: si.Namespace, Name: si.Name}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	old := ix.imports[k]
	ix.imports[k] = si
	if old == nil {
		ix.namespaces[k.Namespace]++
	}
	ix.rebuild(k)
	switch {
	case ix.quiet:
	case old == nil:
		ix.log.Info("serviceimport added", "serviceimport", k.String(), "type", si.Spec.Type, "ips", si.Spec.IPs)
	case old.Spec.Type != si.Spec.Type || !slices.Equal(old.Spec.IPs, si.Spec.IPs) || !equality.Semantic.DeepEqual(old.Spec.Ports, si.Spec.Ports):
		ix.log.Info("serviceimport changed", "serviceimport", k.String(), "type", si.Spec.Type, "ips", si.Spec.IPs)
	}
}

// DeleteImport removes an import; its names become NXDOMAIN. Its slices are
// kept, for an import that comes back before they go.
func (ix *Index) DeleteImport(namespace, name string) {
	k := types.NamespacedName{Namespace: namespace, Name: name}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if _, ok := ix.imports[k]; !ok {
		return
	}
	delete(ix.imports, k)
	if ix.namespaces[namespace]--; ix.namespaces[namespace] <= 0 {
		delete(ix.namespaces, namespace)
	}
	ix.rebuild(k)
	if !ix.quiet {
		ix.log.Info("serviceimport removed", "serviceimport", k.String())
	}
}

// SetSlice adds or replaces an imported EndpointSlice. A slice without the
// multicluster.kubernetes.io/service-name label belongs to no import and is
// ignored (removed, if it had one before).
func (ix *Index) SetSlice(es *discoveryv1.EndpointSlice) {
	sk := types.NamespacedName{Namespace: es.Namespace, Name: es.Name}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if owner, ok := ix.sliceOwner[sk]; ok && owner.Name != es.Labels[mcsv1beta1.LabelServiceName] {
		ix.removeSlice(sk)
	}
	name := es.Labels[mcsv1beta1.LabelServiceName]
	if name == "" {
		return
	}
	k := types.NamespacedName{Namespace: es.Namespace, Name: name}
	if ix.slices[k] == nil {
		ix.slices[k] = map[string]*discoveryv1.EndpointSlice{}
	}
	if _, ok := ix.slices[k][es.Name]; !ok {
		ix.sliceCount++
	}
	ix.slices[k][es.Name] = es
	ix.sliceOwner[sk] = k
	ix.rebuild(k)
}

// DeleteSlice removes an imported EndpointSlice.
func (ix *Index) DeleteSlice(namespace, name string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.removeSlice(types.NamespacedName{Namespace: namespace, Name: name})
}

func (ix *Index) removeSlice(sk types.NamespacedName) {
	k, ok := ix.sliceOwner[sk]
	if !ok {
		return
	}
	delete(ix.sliceOwner, sk)
	delete(ix.slices[k], sk.Name)
	ix.sliceCount--
	if len(ix.slices[k]) == 0 {
		delete(ix.slices, k)
	}
	ix.rebuild(k)
}

// rebuild replaces the records of import k from its inputs. The caller
// holds the write lock.
func (ix *Index) rebuild(k types.NamespacedName) {
	si := ix.imports[k]
	if si == nil {
		delete(ix.services, k)
	} else {
		ix.services[k] = zone.Build(si, slices.Collect(maps.Values(ix.slices[k])))
	}
	if s := uint32(ix.now().Unix()); s > ix.serial {
		ix.serial = s
	}
	if ix.OnChange != nil {
		ix.OnChange(len(ix.imports), ix.sliceCount)
	}
}

// ImportHandler feeds ServiceImport events of an informer to the index.
func (ix *Index) ImportHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { ix.importEvent(obj, false) },
		UpdateFunc: func(_, obj any) { ix.importEvent(obj, false) },
		DeleteFunc: func(obj any) { ix.importEvent(obj, true) },
	}
}

// SliceHandler feeds EndpointSlice events of an informer to the index.
func (ix *Index) SliceHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { ix.sliceEvent(obj, false) },
		UpdateFunc: func(_, obj any) { ix.sliceEvent(obj, false) },
		DeleteFunc: func(obj any) { ix.sliceEvent(obj, true) },
	}
}

func (ix *Index) importEvent(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		// A delete missed while the watch was down: the last state known.
		obj, deleted = d.Obj, true
	}
	si, ok := obj.(*mcsv1beta1.ServiceImport)
	if !ok {
		return
	}
	if deleted {
		ix.DeleteImport(si.Namespace, si.Name)
		return
	}
	ix.SetImport(si)
}

func (ix *Index) sliceEvent(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	es, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	if deleted {
		ix.DeleteSlice(es.Namespace, es.Name)
		return
	}
	ix.SetSlice(es)
}
