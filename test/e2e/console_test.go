package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/internal/testkit/browser"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestConsole opens the fleet's console (started by dev up, logged into
// with the URL dev status prints) in headless chromium: a service
// exported by east and west shows both; west's agent stops and west
// leaves the service on the open page, without a reload, once its lease
// expires; a load balancer's split changes when east is drained.
func TestConsole(t *testing.T) {
	ns := namespace(t, "e2e-console")
	for _, c := range []string{"east", "west"} {
		export(t, c, ns, service{name: "shop", portName: "http", port: 80, addresses: []string{"10.77.0.1", "10.77.0.2"}})
	}
	waitImport(t, "hub", ns, "shop", map[string][]string{"east": {"10.77.0.1", "10.77.0.2"}, "west": {"10.77.0.1", "10.77.0.2"}}, time.Minute)

	loginURL, err := state.ConsoleLoginURL()
	if err != nil {
		t.Fatal(err)
	}
	ctx := browser.New(t)
	browser.Do(t, ctx, "log in and open the service",
		chromedp.Navigate(loginURL),
		chromedp.WaitVisible(chromedp.CSS(`[data-cluster="west"]`)),
		chromedp.Navigate(state.ConsoleURL()+"#/services/"+ns+"/shop"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-cluster="east"][data-in-import="true"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-cluster="west"][data-in-import="true"]`)),
	)
	browser.Screenshot(t, ctx, "console-e2e-service")
	browser.Eval[bool](t, ctx, `window.notReloaded = true`)

	stop(t, "west/"+"agent", false)
	t.Cleanup(func() { up(t) })
	stopped := time.Now()
	browser.Do(t, ctx, "west leaves the service",
		chromedp.WaitVisible(chromedp.CSS(`tr[data-cluster="west"][data-in-import="false"]`)))
	// The registry drops west when its lease expires (leaseTTL after its
	// last renewal); the page follows through the console's event stream.
	t.Logf("west left the open page %s after its agent stopped (lease TTL %s)", time.Since(stopped).Round(10*time.Millisecond), leaseTTL)
	if !browser.Eval[bool](t, ctx, `window.notReloaded === true`) {
		t.Error("the page reloaded to show west leaving")
	}
	browser.Screenshot(t, ctx, "console-e2e-west-gone")
	up(t)

	// A load balancer of shop on the hub: east and west share it; east
	// drained, its configured share goes to 0.
	waitImport(t, "hub", ns, "shop", map[string][]string{"east": {"10.77.0.1", "10.77.0.2"}, "west": {"10.77.0.1", "10.77.0.2"}}, time.Minute)
	hub := kube(t, "hub")
	lb := &networkingv1alpha1.MultiClusterLoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: networkingv1alpha1.MultiClusterLoadBalancerSpec{
			ServiceImportName: "shop",
			Ports:             []networkingv1alpha1.LoadBalancerPort{{Port: int32(testkit.FreePort(t)), Protocol: "TCP", TargetPort: ptr(int32(80))}},
		},
	}
	if err := hub.Create(context.Background(), lb); err != nil {
		t.Fatal(err)
	}
	browser.Do(t, ctx, "the load balancer's split",
		chromedp.Navigate(state.ConsoleURL()+"#/entrypoints"),
		chromedp.WaitVisible(chromedp.CSS(`[data-loadbalancer="`+ns+`/shop"] tr[data-cluster="east"][data-state="Healthy"][data-share="0.500"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-loadbalancer="`+ns+`/shop"] tr[data-cluster="west"][data-share="0.500"]`)),
	)
	if err := hub.Get(context.Background(), client.ObjectKeyFromObject(lb), lb); err != nil {
		t.Fatal(err)
	}
	lb.Spec.Clusters = []networkingv1alpha1.ClusterOverride{{Name: "east", Drain: true}}
	if err := hub.Update(context.Background(), lb); err != nil {
		t.Fatal(err)
	}
	browser.Do(t, ctx, "east drained",
		chromedp.WaitVisible(chromedp.CSS(`[data-loadbalancer="`+ns+`/shop"] tr[data-cluster="east"][data-state="Draining"][data-share="0.000"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-loadbalancer="`+ns+`/shop"] tr[data-cluster="west"][data-share="1.000"]`)),
	)
	browser.Screenshot(t, ctx, "console-e2e-drained")
}
