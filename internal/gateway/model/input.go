package model

import (
	"net/netip"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Input is every object the model depends on, as read from the hub cluster.
// Order does not matter. Objects are only read, never changed.
type Input struct {
	// ControllerName selects the GatewayClasses to implement
	// (keys.GatewayControllerName).
	ControllerName string
	// LocalCluster and LocalRegion are the hub's cluster id and region:
	// the cluster of the endpoints of Service backends, whose
	// EndpointSlices carry no source-cluster label.
	LocalCluster string
	LocalRegion  string
	// CRDBundleVersions are the gateway.networking.k8s.io/bundle-version
	// annotations of the Gateway API CRDs installed ("" for one without),
	// for the GatewayClass SupportedVersion condition.
	CRDBundleVersions []string

	GatewayClasses  []gwv1.GatewayClass
	Gateways        []gwv1.Gateway
	HTTPRoutes      []gwv1.HTTPRoute
	ReferenceGrants []gwv1.ReferenceGrant
	// Namespaces are needed for allowedRoutes selectors only.
	Namespaces     []corev1.Namespace
	Services       []corev1.Service
	ServiceImports []mcsv1beta1.ServiceImport
	// Secrets are the TLS Secrets listeners may reference.
	Secrets        []corev1.Secret
	EndpointSlices []discoveryv1.EndpointSlice
	// BackendTrafficPolicies set how backends' endpoints are checked,
	// retried and chosen.
	BackendTrafficPolicies []networkingv1alpha1.BackendTrafficPolicy
	// MultiClusterLoadBalancers are served when their class is one of
	// LoadBalancerClasses, the classes this controller's provider serves.
	MultiClusterLoadBalancers []networkingv1alpha1.MultiClusterLoadBalancer
	LoadBalancerClasses       []string
	// ValidateAnnotations checks the provider annotations of a Gateway of
	// class (those the model keeps: keys.AzureAnnotationPrefix but the
	// controller's own); an error refuses the Gateway (Accepted=False,
	// InvalidParameters, with the error as message). The providers hand it
	// in (annotations.Validator for Azure Front Door), so the model knows
	// no provider's rules. Nil accepts any.
	ValidateAnnotations func(class string, annotations map[string]string) error
	// Features returns the Gateway API features of the provider that
	// serves a GatewayClass (by name), for its status.supportedFeatures;
	// nil lists none.
	Features func(class string) []gwv1.FeatureName
	// AddressPool, when valid, gives every Gateway an address of its own
	// (edgev1.Gateway.Address, GatewayStatus.Addresses): fleetnet-gateway's
	// --gateway-address-pool. Without one, the edge's Gateways share its
	// sockets, and conflicts between them go to the oldest (sockets.go).
	AddressPool netip.Prefix
	// CloudClass reports whether a cloud provider, not the edge, serves
	// the Gateways of a GatewayClass (by name): their listeners share no
	// socket of the edge and may use its reserved ports. Nil: the edge
	// serves every class.
	CloudClass func(class string) bool
	// ReservedPorts are the ports the edges hold for themselves (their
	// metrics and health ports: fleetnet-gateway's --edge-reserved-ports),
	// each with what holds it. A Gateway listener or an edge load
	// balancer's port there is refused (PortUnavailable, PortConflict)
	// instead of being sent to edges that cannot bind it.
	ReservedPorts map[int32]string
	// Previous is the model handed to the providers last (nil none): a
	// Gateway or load balancer refused now keeps its entry from it, so
	// that a mistake in an edit does not withdraw what serves (fail
	// static; see edgev1.Gateway's Refused and Hold).
	Previous *edgev1.Model
	// LastAccepted is, per object (LastAcceptedKey), the spec of its last
	// accepted generation, kept by the controller across its restarts: a
	// refused object that Previous does not hold (the controller
	// restarted since) is served as that spec describes, rather than held
	// (see Build and lastaccepted.go).
	LastAccepted map[string]LastAccepted
}

// Result is the model and the status it implies.
type Result struct {
	Model  edgev1.Model `json:"model"`
	Status Status       `json:"status"`
}

// Status is the status of every object fleetnet-gateway owns, each list
// sorted by namespace and name. Conditions have no lastTransitionTime.
type Status struct {
	GatewayClasses []GatewayClassStatus `json:"gatewayClasses"`
	Gateways       []GatewayStatus      `json:"gateways"`
	HTTPRoutes     []HTTPRouteStatus    `json:"httpRoutes"`
	// BackendTrafficPolicies are every policy's status, ours whatever
	// Gateway uses it.
	BackendTrafficPolicies []BackendTrafficPolicyStatus `json:"backendTrafficPolicies"`
	LoadBalancers          []LoadBalancerStatus         `json:"loadBalancers"`
}

// GatewayClassStatus is the status of one GatewayClass of ours.
type GatewayClassStatus struct {
	Name       string             `json:"name"`
	Conditions []metav1.Condition `json:"conditions"`
	// SupportedFeatures are the class's provider's Gateway API features
	// (Input.Features), sorted.
	SupportedFeatures []gwv1.FeatureName `json:"supportedFeatures,omitempty"`
}

// GatewayStatus is the status of one Gateway of ours, without Programmed,
// which depends on the data plane.
type GatewayStatus struct {
	Namespace  string                `json:"namespace"`
	Name       string                `json:"name"`
	Conditions []metav1.Condition    `json:"conditions"`
	Listeners  []gwv1.ListenerStatus `json:"listeners"`
	// Addresses is the Gateway's own address from Input.AddressPool;
	// without a pool the data plane's addresses are the Gateway's.
	Addresses []string `json:"addresses,omitempty"`
	// AddressProblem says why the Gateway has no address of its own
	// (the pool is exhausted): it is then not served.
	AddressProblem string `json:"addressProblem,omitempty"`
}

// HTTPRouteStatus is the status of one HTTPRoute for the parents of ours
// it references; other controllers' parents are theirs to write.
type HTTPRouteStatus struct {
	Namespace string                   `json:"namespace"`
	Name      string                   `json:"name"`
	Parents   []gwv1.RouteParentStatus `json:"parents"`
}
