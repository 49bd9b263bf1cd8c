package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/testkit"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// BenchmarkRouteToServing measures, with 1,000 HTTPRoutes already served,
// the time from writing one more HTTPRoute to the edge serving it.
func BenchmarkRouteToServing(b *testing.B) {
	const routes = 1000
	hub := startHub(b)
	c := hub.Client(b)
	ctx := context.Background()
	listen := startGatewayAndEdge(b, hub)
	localAddress(b)
	host, port := backend(b, "east")
	route := func(name, prefix string) *gwv1.HTTPRoute {
		return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "edge"}}},
			Rules: []gwv1.HTTPRouteRule{{
				Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To(prefix)}}},
				BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
					Group: ptr.To(gwv1.Group(mcsv1beta1.GroupName)), Kind: ptr.To(gwv1.Kind("ServiceImport")), Name: "echo",
				}}}},
			}},
		}}
	}
	objs := echoGateway(listen, importedSlice("echo-east", "east", host, port))
	for i := range routes {
		objs = append(objs, route(fmt.Sprintf("r%d", i), fmt.Sprintf("/r%d", i)))
	}
	start := time.Now()
	create(b, c, objs...)
	served := func(path string) error {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", listen, path))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("GET %s: %d", path, resp.StatusCode)
		}
		return nil
	}
	testkit.Eventually(b, 5*time.Minute, fmt.Sprintf("the %d HTTPRoutes to be served", routes), func(context.Context) error { return served(fmt.Sprintf("/r%d", routes-1)) })
	b.Logf("%d HTTPRoutes written and served in %s", routes, time.Since(start).Round(time.Millisecond))

	n := 0
	for b.Loop() {
		name := fmt.Sprintf("new%d", n)
		n++
		r := route(name, "/"+name)
		if err := c.Create(ctx, r); err != nil {
			b.Fatal(err)
		}
		// Polled every 2 ms, not with testkit's backoff: the wait is
		// what the benchmark measures.
		deadline := time.Now().Add(time.Minute)
		for served("/"+name) != nil {
			if time.Now().After(deadline) {
				b.Fatalf("route %s not served within a minute", name)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}
