// Package lease registers the cluster with the registry and keeps its lease
// alive. When the registry answers a renewal with NotFound, it has lost the
// cluster: the registrar registers again and asks for everything to be
// republished.
package lease

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
)

// Registrar holds the cluster's registration.
type Registrar struct {
	Client  registryv1.RegistryClient
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
}

// Registered reports whether the cluster currently holds a lease.
func (r *Registrar) Registered() bool { return r.registered.Load() }

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
		if !r.registered.Load() {
			resp, err := r.Client.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: r.Cluster})
			if err != nil {
				r.fail(ctx, "registering with the registry", err, backoff, 0)
				continue
			}
			ttl = time.Duration(resp.GetLeaseTtlSeconds()) * time.Second
			if r.OnRegistered != nil {
				if err := r.OnRegistered(ctx); err != nil {
					r.fail(ctx, "reading back this cluster's records after registering", err, backoff, 0)
					continue
				}
			}
			backoff.reset()
			retrying = false
			r.registered.Store(true)
			r.Log.Info("registered with the registry", "cluster", r.Cluster.GetId(), "leaseTTL", ttl)
		}
		if !retrying {
			// Renew at a third of the TTL, with ±20% jitter so a fleet's
			// agents do not renew in lockstep.
			wait := time.Duration(float64(ttl) / 3 * (0.8 + 0.4*r.Rand.Float64()))
			select {
			case <-ctx.Done():
				return nil
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
		if r.Recorder != nil && r.Regarding != nil {
			r.Recorder.Eventf(r.Regarding, nil, corev1.EventTypeWarning, keys.ReasonRegistryRefused, "Register",
				"%s failed for cluster %s: %s (retrying in %s)", what, r.Cluster.GetId(), status.Convert(err).Message(), wait.Round(time.Second))
		}
	} else {
		r.Log.Info(what+" failed; retrying", "cluster", r.Cluster.GetId(), "code", status.Code(err).String(), "err", err, "retryIn", wait)
	}
	select {
	case <-ctx.Done():
	case <-r.Clock.After(wait):
	}
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
