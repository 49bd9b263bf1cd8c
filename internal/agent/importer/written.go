package importer

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Expectations on the reconciler's own ServiceImport writes.
const (
	// writtenTTL bounds how long a write is expected in the cache: one that
	// never shows (the object was deleted since) is then trusted away.
	writtenTTL = 2 * time.Second
	// cacheBehindRetry is how soon an import whose cache is behind is
	// reconciled again (the watch event of the reconciler's own write is
	// filtered out, so nothing else would bring it back).
	cacheBehindRetry = 25 * time.Millisecond
)

// writtenImports remembers, per import, the resourceVersion of the
// ServiceImport this reconciler last wrote (spec or status) and the
// resourceVersions it knows precede it, so that a reconcile on a cache
// that has not yet seen that write waits for it instead of acting on the
// older object. A second registry event of a new import, reconciled right
// after the first, would otherwise find no ServiceImport, or one without
// its spec.ips or status, and write them all again (server-side apply
// even removes the ClusterSetIP for a moment, as its manager no longer
// sets it). resourceVersions are only compared for equality, as the API
// asks: the cache is behind when it shows one this reconciler wrote
// before, or read before writing; any other is someone else's write, and
// the cache is trusted. It is a record of what was written, compared with
// what the cache shows, never a substitute for reading it.
type writtenImports struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*writtenImport
}

type writtenImport struct {
	last    string
	earlier map[string]bool
	at      time.Time
}

// record notes out, as the API server returned it from a write computed
// from base (nil when the cache had none), at now.
func (w *writtenImports) record(base, out *mcsv1beta1.ServiceImport, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[types.NamespacedName]*writtenImport{}
	}
	key := types.NamespacedName{Namespace: out.Namespace, Name: out.Name}
	e := w.m[key]
	if e == nil || now.Sub(e.at) > writtenTTL {
		e = &writtenImport{earlier: map[string]bool{}}
		w.m[key] = e
	}
	if base != nil && base.ResourceVersion != "" {
		e.earlier[base.ResourceVersion] = true
	}
	if e.last != "" {
		e.earlier[e.last] = true
	}
	e.last, e.at = out.ResourceVersion, now
	delete(e.earlier, e.last) // a no-op write returns the same version
}

// behind reports whether cached (nil when the cache has no such
// ServiceImport) is older than the reconciler's last write of key. A
// cache that has caught up, shows someone else's write, or is still behind
// after writtenTTL ends the expectation.
func (w *writtenImports) behind(key types.NamespacedName, cached *mcsv1beta1.ServiceImport, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[key]
	if !ok {
		return false
	}
	switch {
	case now.Sub(e.at) > writtenTTL:
	case cached == nil:
		return true
	case e.earlier[cached.ResourceVersion]:
		return true
	}
	delete(w.m, key)
	return false
}

// forget drops key's expectation (the import is removed).
func (w *writtenImports) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}
