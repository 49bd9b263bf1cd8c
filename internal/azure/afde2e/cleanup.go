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

// blocked waits (Timeout) until a request through url goes unserved,
// then requires every request for BlockedFor to go unserved: a DNS
// failure, a refused connection or any answer but 2xx. One served
// request in that period fails it: the withdrawal left traffic reaching
// the backend.
func (r *run) blocked(ctx context.Context, url string) error {
	served := func(ctx context.Context) (bool, string) {
		status, _, err := r.get(ctx, url, nil)
		if err != nil {
			return false, err.Error()
		}
		return status >= 200 && status <= 299, fmt.Sprintf("status %d", status)
	}
	err := r.poll(ctx, r.Timeout, "traffic to stop", func(ctx context.Context) (bool, error) {
		if ok, how := served(ctx); ok {
			return false, fmt.Errorf("still served (%s)", how)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	start, n := time.Now(), 0
	for time.Since(start) < r.BlockedFor {
		n++
		if ok, how := served(ctx); ok {
			return fmt.Errorf("GET %s was served again (%s) %s after the withdrawal", url, how, time.Since(start).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.PollEvery):
		}
	}
	r.logf("ok: %d requests to %s over %s, none served", n, url, r.BlockedFor)
	return nil
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
