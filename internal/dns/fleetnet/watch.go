package fleetnet

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/fleetnet/fleetnet/internal/dns/index"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
	mcsinformers "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions"
)

// ImportedSliceSelector selects the EndpointSlices that hold imported
// endpoints: those with both MCS labels. The cluster's own Services'
// slices are neither cached nor answered: a Service that is not imported is
// not in the clusterset zone.
const ImportedSliceSelector = mcsv1beta1.LabelServiceName + "," + mcsv1beta1.LabelSourceCluster

// Watcher runs the informers that feed an index: every ServiceImport, and
// the imported EndpointSlices. It needs list and watch on both, nothing
// else.
type Watcher struct {
	log         *slog.Logger
	ix          *index.Index
	kube        informers.SharedInformerFactory
	mcs         mcsinformers.SharedInformerFactory
	importsSync cache.InformerSynced
	slicesSync  cache.InformerSynced
	stop        chan struct{}
	startOnce   sync.Once
	stopOnce    sync.Once
}

// Clients returns the clients a Watcher needs for cfg.
func Clients(cfg *rest.Config) (kubernetes.Interface, mcsclient.Interface, error) {
	// EndpointSlices are a built-in type: protobuf is smaller and faster to
	// decode than JSON. ServiceImports are a CRD, served as JSON only.
	kcfg := rest.CopyConfig(cfg)
	kcfg.ContentType = "application/vnd.kubernetes.protobuf"
	kcfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	kc, err := kubernetes.NewForConfig(kcfg)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	mc, err := mcsclient.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the multicluster.x-k8s.io client: %w", err)
	}
	return kc, mc, nil
}

// NewWatcher builds the informers and registers ix's handlers; Start runs
// them.
func NewWatcher(kc kubernetes.Interface, mc mcsclient.Interface, ix *index.Index, log *slog.Logger) (*Watcher, error) {
	w := &Watcher{
		log: log, ix: ix,
		// No resync: the index follows events, and a resync would only
		// rebuild what has not changed.
		kube: informers.NewSharedInformerFactoryWithOptions(kc, 0,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = ImportedSliceSelector }),
			informers.WithTransform(trim)),
		mcs:  mcsinformers.NewSharedInformerFactoryWithOptions(mc, 0, mcsinformers.WithTransform(trim)),
		stop: make(chan struct{}),
	}
	reg, err := w.mcs.Multicluster().V1beta1().ServiceImports().Informer().AddEventHandler(ix.ImportHandler())
	if err != nil {
		return nil, fmt.Errorf("watching serviceimports: %w", err)
	}
	// A registration has synced once its handler has seen the first list,
	// which the informer's own HasSynced does not promise.
	w.importsSync = reg.HasSynced
	reg, err = w.kube.Discovery().V1().EndpointSlices().Informer().AddEventHandler(ix.SliceHandler())
	if err != nil {
		return nil, fmt.Errorf("watching endpointslices: %w", err)
	}
	w.slicesSync = reg.HasSynced
	return w, nil
}

// Start starts the informers once; when both caches have synced it tells
// the index (which then logs each change) and calls onSynced.
func (w *Watcher) Start(onSynced func()) {
	w.startOnce.Do(func() {
		w.kube.Start(w.stop)
		w.mcs.Start(w.stop)
		go func() {
			start := time.Now()
			// Polled every 10 ms rather than cache.WaitForCacheSync's
			// 100 ms: readiness, and the end of SERVFAIL, follow the sync
			// closely, which a rollout of fleetnet-dns waits for.
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for !w.importsSync() || !w.slicesSync() {
				select {
				case <-w.stop:
					return
				case <-tick.C:
				}
			}
			w.log.Info("serviceimport and endpointslice caches synced", "after", time.Since(start).Round(time.Millisecond).String())
			w.ix.Synced()
			onSynced()
		}()
	})
}

// Stop stops the informers and waits for them.
func (w *Watcher) Stop() {
	w.stopOnce.Do(func() {
		close(w.stop)
		w.kube.Shutdown()
		w.mcs.Shutdown()
	})
}

// trim drops what the index never reads before an object is cached:
// managed fields and annotations are often most of an object's size.
func trim(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		m.SetAnnotations(nil)
	}
	return obj, nil
}
