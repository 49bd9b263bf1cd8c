// Package ingress decides what an east-west gateway carries for other
// clusters: a stream of cluster C for service port S is carried only when
// this cluster exports S over TCP and the export's audience, as the
// registry computed it for the export's status (view.StatusAudience, the
// same rule the registry applies to its own readers), includes C. It then
// goes to one of S's ready endpoints here.
package ingress

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/eastwest/tunnel"
	"github.com/fleetnet/fleetnet/internal/registry/view"
)

// Export is a service this cluster exports, as its gateway serves it.
type Export struct {
	Namespace, Name string
	// Audience is who may import it (view.StatusAudience of the registry's
	// status for the export). A cluster it does not include is refused.
	Audience view.Audience
	// Ports maps each exported TCP service port to the endpoints
	// ("host:port", the endpoint's own port) that are ready and not
	// terminating.
	Ports map[int32][]string
}

type key struct{ namespace, name string }

// Table is the exports a gateway serves, immutable once made: a new one
// replaces it whole when exports, scopes or endpoints change.
type Table struct {
	exports map[key]*Export
}

// NewTable indexes exports; a later export of the same service replaces
// an earlier one.
func NewTable(exports []Export) *Table {
	t := &Table{exports: make(map[key]*Export, len(exports))}
	for i := range exports {
		e := &exports[i]
		t.exports[key{e.Namespace, e.Name}] = e
	}
	return t
}

// FromModel is the table of a model's east-west section (none: nothing
// is carried). Each export's audience is read from its registry status
// fields by the registry's own rule, and only ready endpoints are kept.
func FromModel(ew *edgev1.EastWest) *Table {
	if ew == nil {
		return NewTable(nil)
	}
	exports := make([]Export, 0, len(ew.Exports))
	for _, e := range ew.Exports {
		ex := Export{Namespace: e.Namespace, Name: e.Name, Ports: make(map[int32][]string, len(e.Ports)),
			Audience: view.StatusAudience(&registryv1.ExportStatus{ToEveryCluster: e.ToEveryCluster, ImportedBy: e.ImportedBy})}
		for _, p := range e.Ports {
			eps := []string{}
			for _, ep := range p.Endpoints {
				if ep.Ready {
					eps = append(eps, net.JoinHostPort(ep.Address, strconv.Itoa(int(ep.Port))))
				}
			}
			ex.Ports[p.Port] = eps
		}
		exports = append(exports, ex)
	}
	return NewTable(exports)
}

// Authorize is tunnel.Server's Authorize: the endpoints to try for
// caller's stream to tg, from a random one on so that streams spread over
// them, or why not. A cluster outside the scope is told the service is
// not exported to it, as the registry does not show it the export either.
func (t *Table) Authorize(caller string, tg tunnel.Target) ([]string, *tunnel.Refusal) {
	if caller == "" {
		return nil, &tunnel.Refusal{Status: http.StatusForbidden, Reason: tunnel.ReasonNotCluster, Message: "the caller names no cluster"}
	}
	e := t.exports[key{tg.Namespace, tg.Name}]
	if e == nil {
		return nil, &tunnel.Refusal{Status: http.StatusNotFound, Reason: tunnel.ReasonNotExported, Message: fmt.Sprintf("%s/%s is not exported by this cluster", tg.Namespace, tg.Name)}
	}
	if !e.Audience.Includes(caller) {
		return nil, &tunnel.Refusal{Status: http.StatusNotFound, Reason: tunnel.ReasonOutOfScope, Message: fmt.Sprintf("%s/%s is not exported to cluster %s", tg.Namespace, tg.Name, caller)}
	}
	endpoints, ok := e.Ports[tg.Port]
	if !ok {
		ports := make([]int32, 0, len(e.Ports))
		for p := range e.Ports {
			ports = append(ports, p)
		}
		slices.Sort(ports)
		return nil, &tunnel.Refusal{Status: http.StatusNotFound, Reason: tunnel.ReasonNotExported, Message: fmt.Sprintf("%s/%s exports no TCP port %d (ports: %v)", tg.Namespace, tg.Name, tg.Port, ports)}
	}
	if len(endpoints) == 0 {
		return nil, &tunnel.Refusal{Status: http.StatusServiceUnavailable, Reason: tunnel.ReasonNoEndpoint, Message: fmt.Sprintf("%s has no ready endpoint in this cluster", tg)}
	}
	start := rand.IntN(len(endpoints))
	return append(slices.Clone(endpoints[start:]), endpoints[:start]...), nil
}
