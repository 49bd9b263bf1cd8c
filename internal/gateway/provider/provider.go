// Package provider is the contract between the gateway controller and
// whatever programs the global entry point (the embedded edge, a cloud's
// load balancer), and the asynchronous queue that keeps provider work off
// the reconcile path.
package provider

import (
	"context"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
)

// Provider programs a whole model.
type Provider interface {
	// Deploy hands the provider a whole model. It returns once the
	// provider took it (the edge: published to the edges; a cloud: its
	// API calls made); serving it may take longer, which Progress tells.
	// On an error the provider keeps serving what it served before.
	Deploy(ctx context.Context, m *edgev1.Model) error
	// Progress says where the newest deployed model stands.
	Progress() Progress
}

// Progress of a model towards being served.
type Progress struct {
	// Version is the model version the provider deployed last ("" none).
	Version string
	// Served is true when the data plane serves Version.
	Served bool
	// Message says where it stands, for the Programmed condition.
	Message string
	// Addresses are where the Gateways are reached.
	Addresses []string
	// LoadBalancers is the progress of each load balancer
	// ("namespace/name") that a provider serves with resources of its own
	// (a cloud's), where it differs from the whole model's: present while
	// the provider holds resources for it, deleting ones included.
	LoadBalancers map[string]LoadBalancerProgress
	// Gateways is the progress of each Gateway ("namespace/name") that a
	// cloud provider serves (Split.GatewayClasses routes its class there),
	// Served only for the newest model; the edge's Gateways have none.
	Gateways map[string]LoadBalancerProgress
	// RouteRefusals are the route matches cloud providers refuse, for
	// the HTTPRoutes' status.
	RouteRefusals []RouteRefusal
	// PartRefusals are the Gateway listeners and load balancer ports the
	// data plane serves Version without (an edge cannot bind them), for
	// those objects' status; the rest of the model is served.
	PartRefusals []PartRefusal
	// ClassVersions is, per load balancer class served by such a
	// provider, the model version it finished deploying ("" none). A
	// deleted load balancer of that class is withdrawn once this is the
	// current version and LoadBalancers has no entry for it.
	ClassVersions map[string]string
}

// RouteRefusal is an HTTPRoute match that a cloud provider serving one of
// the route's parent Gateways cannot express (e.g. a header match on Azure
// Front Door): it is not served there; the route's other matches are.
type RouteRefusal struct {
	GatewayNamespace, GatewayName string
	RouteNamespace, RouteName     string
	Rule, Match                   int
	// Reason names the feature and why.
	Reason string
}

// PartRefusal is a Gateway's listener or a load balancer's port that the
// data plane serves the model without.
type PartRefusal struct {
	// Kind is edgev1.RefusalKindGateway or edgev1.RefusalKindLoadBalancer.
	Kind            string
	Namespace, Name string
	// Listener is the Gateway listener's name; Protocol the load
	// balancer port's.
	Listener string
	Port     int32
	Protocol string
	// Reason names each data plane (edge) that refused it and why.
	Reason string
}

// LoadBalancerProgress is where one load balancer stands at its provider.
type LoadBalancerProgress struct {
	// Served: the provider serves the load balancer as the model of
	// ClassVersions[its class] describes it.
	Served bool
	// Message says where it stands, for the Programmed condition.
	Message string
	// Reason is the kind of failure of its last deploy (a
	// keys.ReasonAzure* value), for Programmed=False and a Warning event;
	// "" when it did not fail.
	Reason string
	// Addresses are its global addresses.
	Addresses []string
}
