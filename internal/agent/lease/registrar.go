// Package lease registers the cluster with the registry and keeps its lease
// alive. When the registry answers a renewal with NotFound, it has lost the
// cluster: the registrar registers again and asks for everything to be
// republished. When the cluster's published properties change, it
// registers again, which the registry takes as an update of its record.
package lease

import (
	"context"
	"log/slog"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
)

// Registrar holds the cluster's registration.
type Registrar struct {
	Client registryv1.RegistryClient
	// Cluster is what is registered; its properties are the first
	// published, then those of UpdateProperties.
	Cluster *registryv1.Cluster
	// OnRegistered runs after every successful registration, before the
	// cluster counts as registered; after a re-registration the registry may
	// have lost anything. An error makes the registration count as failed.
	OnRegistered func(ctx context.Context) error
	// OnRecovered runs when a renewal succeeds after one failed: the
	// registry answers again, and what failed meanwhile can be retried
	// now rather than after its own backoff.
	OnRecovered func(ctx context.Context)
	Clock       clock.Clock
	Log         *slog.Logger
	// Rand draws jitter; a seeded source makes tests repeatable.
	Rand *rand.Rand
	// Recorder, when set, gets a Warning event on Regarding for each
	// failure that retrying does not cure, so that it shows beside the
	// cluster's objects (kubectl describe, kubectl get events), not only
	// in the agent's log.
	Recorder  events.EventRecorder
	Regarding runtime.Object

	registered atomic.Bool

	mu sync.Mutex
	// properties are those to publish (nil until UpdateProperties: then
	// Cluster's); update is set when they changed since the last
	// registration; wake tells Start.
	properties map[string]string
	update     bool
	wake       chan struct{}
}

// Registered reports whether the cluster currently holds a lease.
func (r *Registrar) Registered() bool { return r.registered.Load() }

// UpdateProperties sets the cluster's properties to publish. When they
// differ from the last ones given, the registrar registers again at once:
// the registry keeps the cluster's lease and records and rewrites its
// Cluster record, and the imports scoped by selectors over the properties
// follow. Safe for concurrent use.
func (r *Registrar) UpdateProperties(properties map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if maps.Equal(properties, r.currentProperties()) {
		return
	}
	r.properties, r.update = maps.Clone(properties), true
	select {
	case r.wakeChan() <- struct{}{}:
	default:
	}
}

// currentProperties are the properties to publish; r.mu held.
func (r *Registrar) currentProperties() map[string]string {
	if r.properties == nil {
		return r.Cluster.GetProperties()
	}
	return r.properties
}

// wakeChan is the channel that wakes Start; r.mu held.
func (r *Registrar) wakeChan() chan struct{} {
	if r.wake == nil {
		r.wake = make(chan struct{}, 1)
	}
	return r.wake
}

// registration is the cluster to register, with the current properties,
// and whether they changed since the last registration (which clears it).
func (r *Registrar) registration() (*registryv1.Cluster, bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := proto.Clone(r.Cluster).(*registryv1.Cluster)
	c.Properties = maps.Clone(r.currentProperties())
	update := r.update
	r.update = false
	return c, update, r.wakeChan()
}

// retryUpdate asks for the properties to be registered again.
func (r *Registrar) retryUpdate() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.update = true
}

// Permanent reports whether a registry error will not go away by retrying.
func Permanent(err error) bool {
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied, codes.InvalidArgument, codes.Unimplemented, codes.FailedPrecondition:
		return true
	}
	return false
}

// Start registers, then renews until ctx ends. It implements
// controller-runtime's manager.Runnable.
func (r *Registrar) Start(ctx context.Context) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Rand == nil {
		r.Rand = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	}
	backoff := newBackoff()
	var ttl time.Duration
	// retrying is set after a failed renewal: the next attempt follows the
	// backoff, not another renewal period, so that a registry that was away
	// for a while is reached again well before the lease runs out.
	retrying := false
	for ctx.Err() == nil {
		cluster, update, wake := r.registration()
		if registered := r.registered.Load(); !registered || update {
			what, limit := "registering with the registry", time.Duration(0)
			if registered {
				// An update of the properties: the cluster stays
				// registered meanwhile, and its lease wants renewing
				// within a third of its TTL whatever happens.
				what, limit = "updating this cluster's properties in the registry", ttl/3
			}
			resp, err := r.Client.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: cluster})
			if err == nil {
				ttl = time.Duration(resp.GetLeaseTtlSeconds()) * time.Second
				// Registering may have recreated a cluster the registry
				// had lost: read its records back, as after any
				// registration.
				if r.OnRegistered != nil {
					if err = r.OnRegistered(ctx); err != nil {
						what = "reading back this cluster's records after registering"
					}
				}
			}
			if err != nil {
				if registered && Permanent(err) {
					// Keep the registration and the properties the
					// registry holds; renewing goes on.
					r.Log.Error(what+" failed permanently; the registry keeps the properties it has", "cluster", r.Cluster.GetId(), "code", status.Code(err).String(), "err", err)
					r.event(what, err, 0)
				} else {
					if registered {
						r.retryUpdate()
					}
					r.fail(ctx, what, err, backoff, limit)
					continue
				}
			} else {
				backoff.reset()
				retrying = false
				r.registered.Store(true)
				r.Log.Info("registered with the registry", "cluster", r.Cluster.GetId(), "leaseTTL", ttl, "properties", len(cluster.GetProperties()))
			}
		}
		if !retrying {
			// Renew at a third of the TTL, with ±20% jitter so a fleet's
			// agents do not renew in lockstep.
			wait := time.Duration(float64(ttl) / 3 * (0.8 + 0.4*r.Rand.Float64()))
			select {
			case <-ctx.Done():
				return nil
			case <-wake:
				continue // properties changed: register them, which renews too
			case <-r.Clock.After(wait):
			}
		}
		_, err := r.Client.RenewLease(ctx, &registryv1.RenewLeaseRequest{ClusterId: r.Cluster.GetId()})
		switch {
		case err == nil:
			backoff.reset()
			if retrying {
				r.Log.Info("the registry answers again", "cluster", r.Cluster.GetId())
				if r.OnRecovered != nil {
					r.OnRecovered(ctx)
				}
			}
			retrying = false
		case status.Code(err) == codes.NotFound:
			r.Log.Info("the registry no longer holds this cluster; registering again and republishing", "cluster", r.Cluster.GetId())
			r.registered.Store(false)
		default:
			// While the lease may still be live, retry at least every
			// third of its TTL.
			r.fail(ctx, "renewing the lease", err, backoff, ttl/3)
			retrying = true
		}
	}
	return nil
}

// NeedLeaderElection: only the leader registers and writes.
func (r *Registrar) NeedLeaderElection() bool { return true }

// fail logs err and waits: the backoff, at most limit when one is given,
// and at least a minute for errors that retrying does not cure.
func (r *Registrar) fail(ctx context.Context, what string, err error, b *backoff, limit time.Duration) {
	wait := b.next()
	if limit > 0 {
		wait = min(wait, limit)
	}
	if Permanent(err) {
		// Retrying fast will not help; say so loudly and wait long.
		wait = max(wait, time.Minute)
		r.Log.Error(what+" failed permanently; fix the configuration", "cluster", r.Cluster.GetId(), "code", status.Code(err).String(), "err", err, "retryIn", wait)
		r.event(what, err, wait)
	} else {
		r.Log.Info(what+" failed; retrying", "cluster", r.Cluster.GetId(), "code", status.Code(err).String(), "err", err, "retryIn", wait)
	}
	select {
	case <-ctx.Done():
	case <-r.Clock.After(wait):
	}
}

// event records a Warning for a failure that retrying does not cure,
// saying when the registrar tries again (wait; 0: when the properties
// change again).
func (r *Registrar) event(what string, err error, wait time.Duration) {
	if r.Recorder == nil || r.Regarding == nil {
		return
	}
	retry := "retrying in " + wait.Round(time.Second).String()
	if wait == 0 {
		retry = "retrying when they change again"
	}
	r.Recorder.Eventf(r.Regarding, nil, corev1.EventTypeWarning, keys.ReasonRegistryRefused, "Register",
		"%s failed for cluster %s: %s (%s)", what, r.Cluster.GetId(), status.Convert(err).Message(), retry)
}

type backoff struct{ cur time.Duration }

func newBackoff() *backoff { return &backoff{} }

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = 200 * time.Millisecond
	} else {
		b.cur = min(2*b.cur, 30*time.Second)
	}
	return b.cur
}

func (b *backoff) reset() { b.cur = 0 }
