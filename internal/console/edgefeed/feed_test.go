package edgefeed

import (
	"strings"
	"testing"
	"time"
)

const before = `# TYPE fleetnet_edge_requests_total counter
fleetnet_edge_requests_total{route="demo/web/0",backend="ServiceImport/demo/web",cluster="east",code="200"} 100
fleetnet_edge_requests_total{route="demo/web/0",backend="ServiceImport/demo/web",cluster="east",code="503"} 10
fleetnet_edge_requests_total{route="demo/web/0",backend="ServiceImport/demo/web",cluster="west",code="200"} 50
fleetnet_edge_requests_total{route="demo/web/0",backend="",cluster="",code="404"} 7
# TYPE fleetnet_edge_l4_connections_total counter
fleetnet_edge_l4_connections_total{load_balancer="demo/db",port="5432",cluster="east"} 5
`

const after = `# TYPE fleetnet_edge_requests_total counter
fleetnet_edge_requests_total{route="demo/web/0",backend="ServiceImport/demo/web",cluster="east",code="200"} 120
fleetnet_edge_requests_total{route="demo/web/0",backend="ServiceImport/demo/web",cluster="east",code="503"} 10
fleetnet_edge_requests_total{route="demo/web/0",backend="ServiceImport/demo/web",cluster="west",code="200"} 4
fleetnet_edge_requests_total{route="demo/web/0",backend="ServiceImport/demo/web",cluster="west",code="502"} 6
fleetnet_edge_requests_total{route="demo/web/0",backend="",cluster="",code="404"} 9
# TYPE fleetnet_edge_l4_connections_total counter
fleetnet_edge_l4_connections_total{load_balancer="demo/db",port="5432",cluster="east"} 9
fleetnet_edge_l4_connections_total{load_balancer="demo/db",port="5433",cluster="east"} 2
# TYPE fleetnet_edge_backend_endpoints gauge
fleetnet_edge_backend_endpoints{backend="ServiceImport/demo/web",cluster="east",health="healthy"} 2
fleetnet_edge_backend_endpoints{backend="ServiceImport/demo/web",cluster="east",health="ejected"} 1
# TYPE fleetnet_edge_l4_endpoints gauge
fleetnet_edge_l4_endpoints{load_balancer="demo/db",port="5432",cluster="east",health="healthy"} 3
fleetnet_edge_l4_endpoints{load_balancer="demo/db",port="5433",cluster="east",health="healthy"} 3
`

func TestRatesAndHealth(t *testing.T) {
	b, err := Parse(strings.NewReader(before))
	if err != nil {
		t.Fatal(err)
	}
	a, err := Parse(strings.NewReader(after))
	if err != nil {
		t.Fatal(err)
	}
	tr := newTraffic(time.Time{})
	AddRates(Counters(b), Counters(a), 2*time.Second, &tr)
	AddHealth(a, &tr)
	for _, tc := range []struct {
		what      string
		got, want float64
	}{
		// east: 20 more answers in 2 s.
		{"route east", tr.Routes["demo/web/0"]["east"], 10},
		// west's counter went down: the edge restarted, 4 + 6 since.
		{"route west", tr.Routes["demo/web/0"]["west"], 5},
		{"route west errors", tr.RouteErrors["demo/web/0"]["west"], 3},
		// east answered no more 503s: no errors.
		{"route east errors", tr.RouteErrors["demo/web/0"]["east"], 0},
		// Requests no cluster took are not a cluster's.
		{"route no cluster", tr.Routes["demo/web/0"][""], 0},
		// Both ports: 4 more on 5432, 2 on the new 5433.
		{"load balancer east", tr.LoadBalancers["demo/db"]["east"], 3},
		{"backend healthy", float64(tr.Backends["ServiceImport/demo/web"]["east"].Healthy), 2},
		{"backend ejected", float64(tr.Backends["ServiceImport/demo/web"]["east"].Ejected), 1},
		{"load balancer healthy", float64(tr.LoadBalancerHealth["demo/db"]["east"].Healthy), 6},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.what, tc.got, tc.want)
		}
	}
	if _, err := Parse(strings.NewReader("not metrics {")); err == nil {
		t.Error("a page that is not metrics parsed")
	}
}
