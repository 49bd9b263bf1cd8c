package afde2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/fleetnet/fleetnet/internal/azure/armerr"
)

// Cleanup deletes the HTTPRoute and Gateway, waits (Timeout) for the
// profile's withdrawal, checks that the old host name stays unserved for
// BlockedFor, and deletes the GatewayClass, the WAF policy and, with
// DeleteGroup, the resource group. Every step runs; it fails when one
// did, a wait past its bound included.
func Cleanup(ctx context.Context, c Config) error {
	r, err := newRun(c)
	if err != nil {
		return err
	}
	gw := &gwv1.Gateway{}
	host := ""
	switch err := r.Kube.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: r.Gateway}, gw); {
	case err == nil && len(gw.Status.Addresses) > 0:
		host = gw.Status.Addresses[0].Value
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("reading the Gateway: %w", err)
	}
	var errs []error
	for _, o := range []client.Object{&gwv1.HTTPRoute{}, &gwv1.Gateway{}} {
		o.SetNamespace(r.Namespace)
		o.SetName(r.Gateway)
		if err := r.Kube.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %T: %w", o, err))
		}
	}
	r.logf("waiting up to %s for fleetnet to withdraw the Gateway's profile...", r.Timeout)
	withdrawn := r.poll(ctx, r.Timeout, "the profile's withdrawal", func(ctx context.Context) (bool, error) {
		ps, err := r.gatewayProfiles(ctx)
		if err != nil {
			return false, err
		}
		if len(ps) > 0 {
			return false, fmt.Errorf("%d profiles still tagged for the Gateway", len(ps))
		}
		return true, nil
	})
	if withdrawn != nil {
		errs = append(errs, withdrawn)
	} else {
		r.logf("ok: the Gateway's profile is gone")
	}
	if host != "" && withdrawn == nil {
		if err := r.blocked(ctx, "http://"+host+"/"); err != nil {
			errs = append(errs, err)
		}
	}
	if err := r.Kube.Delete(ctx, &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: r.Class()}}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting GatewayClass %s: %w", r.Class(), err))
	}
	if err := r.deleteWAF(ctx); err != nil {
		errs = append(errs, err)
	}
	if r.DeleteGroup {
		if _, err := r.armDo(ctx, http.MethodDelete, r.groupID(), resourceGroupsAPI, nil, nil, http.StatusOK, http.StatusAccepted, http.StatusNoContent); err != nil {
			errs = append(errs, fmt.Errorf("deleting resource group %s: %w", r.ResourceGroup, err))
		} else {
			r.logf("resource group %s is being deleted", r.ResourceGroup)
		}
	}
	return errors.Join(errs...)
}

// blocked waits, within Timeout, for a window of BlockedFor in which
// every request through url goes unserved: a DNS failure, a refused
// connection or any answer but 2xx. A served request restarts the window:
// after a change Front Door keeps serving from some of its edges for a
// while, so one served request soon after the withdrawal is propagation,
// not a failure. The withdrawal fails when no such window comes before
// Timeout; the message says the longest window seen and when a request was
// last served.
func (r *run) blocked(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	var since, lastServed time.Time // since: the window's start; zero while served
	var longest time.Duration
	lastHow := ""
	n, servedAgain := 0, 0
	for {
		status, _, err := r.get(ctx, url, nil)
		now := time.Now()
		served := err == nil && status >= 200 && status <= 299
		switch {
		case served:
			if !since.IsZero() {
				servedAgain++
				r.logf("%s served again (status %d) after %s unserved: the window restarts", url, status, now.Sub(since).Round(time.Second))
			}
			since, lastServed, lastHow = time.Time{}, now, fmt.Sprintf("status %d", status)
		case since.IsZero():
			since, n = now, 0
		}
		if !since.IsZero() {
			n++
			longest = max(longest, now.Sub(since))
			if now.Sub(since) >= r.BlockedFor {
				r.logf("ok: %d requests to %s over %s in a row, none served (served again %d times before)", n, url, r.BlockedFor, servedAgain)
				return nil
			}
		}
		select {
		case <-ctx.Done():
			last := "never served since the withdrawal began"
			if !lastServed.IsZero() {
				last = fmt.Sprintf("last served (%s) at %s", lastHow, lastServed.Format(time.RFC3339))
			}
			return fmt.Errorf("GET %s: no %s in a row unserved within %s (the longest was %s; %s)", url, r.BlockedFor, r.Timeout, longest.Round(time.Second), last)
		case <-time.After(r.PollEvery):
		}
	}
}

func (r *run) deleteWAF(ctx context.Context) error {
	poller, err := r.waf.BeginDelete(ctx, r.ResourceGroup, WAFPolicyName, nil)
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, r.Timeout)
		defer cancel()
		_, err = poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: r.PollEvery})
	}
	if err != nil && !armerr.IsNotFound(err) {
		return fmt.Errorf("deleting WAF policy %s: %w", WAFPolicyName, err)
	}
	r.logf("WAF policy %s deleted", WAFPolicyName)
	return nil
}
