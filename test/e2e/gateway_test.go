package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/dev"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// The global entry point on the dev fleet: a Gateway and an HTTPRoute in
// the hub whose backend is the echo ServiceImport are served by the fleet's
// fleetnet-edge on 127.0.0.1 with answers from east and west; when west's
// echo pods stop (its Deployment scaled to 0), traffic goes to east only,
// with no failed request.
func TestGatewayThroughTheEdge(t *testing.T) {
	if err := dev.NodeRequirements(); err != nil {
		t.Fatalf("%v (the e2e suite runs as root in CI)", err)
	}
	ns := namespace(t, "e2e-gateway")
	ctx := context.Background()
	for _, c := range []string{"east", "west"} {
		serveEcho(t, c, ns, "echo", 2, false)
		if err := kube(t, c).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}}); err != nil {
			t.Fatal(err)
		}
	}
	// The echo pods name themselves; the API says where each runs.
	pods := appPods(t, ns, "echo")
	answeredBy := func(status int, body []byte) (string, bool) {
		a, err := parseEcho(body)
		if status != 200 || err != nil {
			return "", false
		}
		p, ok := pods[a.Pod]
		if !ok {
			return "", false
		}
		return p.cluster, true
	}
	hub := kube(t, "hub")
	port := gatewayToEcho(t, ns, "e2e-fleetnet")

	count := func(n int) (map[string]int, int) {
		seen, failed := map[string]int{}, 0
		c := &http.Client{Timeout: 3 * time.Second}
		for range n {
			resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
			if err != nil {
				failed++
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if c, ok := answeredBy(resp.StatusCode, body); ok {
				seen[c]++
			} else {
				failed++
			}
		}
		return seen, failed
	}
	testkit.Eventually(t, 60*time.Second, "the Gateway to be programmed", func(ctx context.Context) error {
		gw := &gwv1.Gateway{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: "edge"}, gw); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed)) {
			return fmt.Errorf("Gateway conditions %+v", gw.Status.Conditions)
		}
		if seen, _ := count(20); seen["east"] == 0 || seen["west"] == 0 {
			return fmt.Errorf("answers by cluster %v, want both", seen)
		}
		return nil
	})
	seen, failed := count(100)
	t.Logf("100 requests through the edge: %v, %d failed", seen, failed)
	if failed != 0 || seen["east"] < 20 || seen["west"] < 20 {
		t.Errorf("100 requests: %v, %d failed; want both clusters and none failed", seen, failed)
	}

	// West's echo pods stop while requests flow.
	var mu sync.Mutex
	var lastWest, stopped time.Time
	fails, total := 0, 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		// A request the edge retries elsewhere after an endpoint of a
		// stopped pod did not answer its connect (1s) is slow, not
		// failed. One waited over 3s once in CI, on a loaded machine
		// (the edge's log was not kept then; it is printed now), so the
		// bound is one a hanging request still misses.
		c := &http.Client{Timeout: 10 * time.Second}
		for {
			select {
			case <-stop:
				return
			default:
			}
			sent := time.Now()
			resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
			took := time.Since(sent)
			mu.Lock()
			total++
			// Slow answers are logged too: the edge retries a request an
			// endpoint of a stopped pod did not take, and how long that
			// took is what a failure would be explained by.
			if (took > time.Second || err != nil) && !stopped.IsZero() {
				t.Logf("request sent %s after west's pods were told to stop took %s", sent.Sub(stopped).Round(time.Millisecond), took.Round(time.Millisecond))
			}
			if err != nil {
				fails++
				t.Logf("failed request: %v", err)
			} else {
				body, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				c, ok := answeredBy(resp.StatusCode, body)
				switch {
				case !ok:
					fails++
					t.Logf("failed request: %d %q (read error %v)", resp.StatusCode, body, rerr)
				case c == "west":
					lastWest = time.Now()
				}
			}
			mu.Unlock()
		}
	})
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	stopped = time.Now()
	mu.Unlock()
	serveEcho(t, "west", ns, "echo", 0, false)
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("west stopped: last answer from west %s after, %d requests, %d failed", lastWest.Sub(stopped).Round(time.Millisecond), total, fails)
	if fails != 0 {
		t.Errorf("%d of %d requests failed while west's pods stopped; the edge's log:\n%s", fails, total, controlplane.Tail(state.Processes[dev.ComponentEdge].Log, 60))
	}
	if lastWest.Sub(stopped) > 2*time.Second {
		t.Errorf("west still answered %s after its pods stopped, want under 2s", lastWest.Sub(stopped))
	}
}

// gatewayToEcho makes a GatewayClass of fleetnet (removed when the test
// ends), a Gateway "edge" with an HTTP listener on a free port, and an
// HTTPRoute sending every request to the ServiceImport "echo", in ns of
// the hub; it returns the port.
func gatewayToEcho(t *testing.T, ns, className string) int {
	t.Helper()
	hub := kube(t, "hub")
	port := testkit.FreePort(t)
	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: className}, Spec: gwv1.GatewayClassSpec{ControllerName: keys.GatewayControllerName}}
	for _, o := range []client.Object{
		class,
		&gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"}, Spec: gwv1.GatewaySpec{
			GatewayClassName: gwv1.ObjectName(class.Name),
			Listeners:        []gwv1.Listener{{Name: "http", Port: gwv1.PortNumber(port), Protocol: gwv1.HTTPProtocolType}},
		}},
		&gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}, Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "edge"}}},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
				Group: ptr(gwv1.Group(mcsv1beta1.GroupName)), Kind: ptr(gwv1.Kind("ServiceImport")), Name: "echo",
			}}}}}},
		}},
	} {
		if err := hub.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), class) })
	return port
}
