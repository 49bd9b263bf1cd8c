package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// MultiClusterLoadBalancer gives an imported service one global L4 (TCP or
// UDP) entry point: connections are spread over the healthy endpoints of
// every cluster that exports it, by weight, on the embedded edge or on an
// Azure cross-region load balancer.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mclb,categories=fleetnet
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.status.addresses[0]`
// +kubebuilder:printcolumn:name="Ports",type=string,JSONPath=`.status.ports`
// +kubebuilder:printcolumn:name="Clusters",type=integer,JSONPath=`.status.healthyClusters`
// +kubebuilder:printcolumn:name="Programmed",type=string,JSONPath=`.status.conditions[?(@.type=="Programmed")].status`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.class`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MultiClusterLoadBalancer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MultiClusterLoadBalancerSpec   `json:"spec"`
	Status MultiClusterLoadBalancerStatus `json:"status,omitempty"`
}

// LoadBalancerClass is the provider that serves a MultiClusterLoadBalancer.
//
// +kubebuilder:validation:Enum=edge;azure-cross-region
type LoadBalancerClass string

// Load balancer classes.
const (
	// LoadBalancerClassEdge is fleetnet-edge's L4 listeners.
	LoadBalancerClassEdge LoadBalancerClass = "edge"
	// LoadBalancerClassAzureCrossRegion is an Azure cross-region (Global
	// tier) load balancer in front of the clusters' regional ones.
	LoadBalancerClassAzureCrossRegion LoadBalancerClass = "azure-cross-region"
)

// MultiClusterLoadBalancerSpec is what to expose and how.
type MultiClusterLoadBalancerSpec struct {
	// ServiceImportName names the ServiceImport, in the load balancer's
	// namespace, whose endpoints serve it.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	ServiceImportName string `json:"serviceImportName"`

	// Ports are exposed at the global address, each mapped to a port of
	// the ServiceImport.
	//
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=port
	// +listMapKey=protocol
	Ports []LoadBalancerPort `json:"ports"`

	// Class is the provider: edge (default) or azure-cross-region.
	//
	// +optional
	// +kubebuilder:default=edge
	Class LoadBalancerClass `json:"class,omitempty"`

	// Clusters override what the exporting clusters say, per cluster:
	// another weight, or draining (no new connections; established ones
	// may finish until the drain timeout).
	//
	// +optional
	// +kubebuilder:validation:MaxItems=100
	// +listType=map
	// +listMapKey=name
	Clusters []ClusterOverride `json:"clusters,omitempty"`

	// HealthCheck is the TCP connect check of every endpoint.
	// +optional
	HealthCheck *L4HealthCheck `json:"healthCheck,omitempty"`

	// Timeouts of connections and flows.
	// +optional
	Timeouts *L4Timeouts `json:"timeouts,omitempty"`
}

// L4Protocol is TCP or UDP.
//
// +kubebuilder:validation:Enum=TCP;UDP
type L4Protocol string

// L4 protocols.
const (
	ProtocolTCP L4Protocol = "TCP"
	ProtocolUDP L4Protocol = "UDP"
)

// LoadBalancerPort is one exposed port.
type LoadBalancerPort struct {
	// Port is the port at the global address.
	//
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`

	// Protocol is TCP or UDP.
	//
	// +kubebuilder:default=TCP
	Protocol L4Protocol `json:"protocol"`

	// TargetPort is the ServiceImport's port this port maps to; the same
	// as Port when unset.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	TargetPort *int32 `json:"targetPort,omitempty"`
}

// ClusterOverride changes how one exporting cluster is used.
type ClusterOverride struct {
	// Name is the cluster's id.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Weight replaces the cluster's fleetnet.dev/weight, 0 to 1000.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Weight *int32 `json:"weight,omitempty"`

	// Drain stops new connections to the cluster; established ones may
	// finish until the drain timeout.
	// +optional
	Drain bool `json:"drain,omitempty"`
}

// L4HealthCheck is a TCP connect check of every endpoint.
//
// +kubebuilder:validation:XValidation:rule="duration(self.timeout) < duration(self.interval)",message="timeout must be shorter than interval"
type L4HealthCheck struct {
	// Interval between two checks of an endpoint, from 100ms to 5m.
	//
	// +optional
	// +kubebuilder:default="500ms"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('5m')",message="interval must be from 100ms to 5m"
	Interval gwv1.Duration `json:"interval,omitempty"`

	// Timeout of one check, at least 10ms and shorter than the interval.
	//
	// +optional
	// +kubebuilder:default="300ms"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10ms')",message="timeout must be at least 10ms"
	Timeout gwv1.Duration `json:"timeout,omitempty"`

	// HealthyThreshold is the successes in a row that bring an endpoint
	// back.
	//
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	HealthyThreshold int32 `json:"healthyThreshold,omitempty"`

	// UnhealthyThreshold is the failures in a row that take an endpoint
	// out.
	//
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	UnhealthyThreshold int32 `json:"unhealthyThreshold,omitempty"`
}

// L4Timeouts bound connections and flows.
type L4Timeouts struct {
	// TCPIdle closes a TCP connection idle in both directions this long,
	// from 1s to 24h.
	//
	// +optional
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="tcpIdle must be from 1s to 24h"
	TCPIdle gwv1.Duration `json:"tcpIdle,omitempty"`

	// UDPIdle ends a UDP flow (a client address and port) without a
	// datagram this long, from 1s to 1h.
	//
	// +optional
	// +kubebuilder:default="1m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="udpIdle must be from 1s to 1h"
	UDPIdle gwv1.Duration `json:"udpIdle,omitempty"`

	// Drain is how long established connections to a draining cluster,
	// or to a port no longer served, may continue, from 0s to 1h.
	//
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('1h')",message="drain must be at most 1h"
	Drain gwv1.Duration `json:"drain,omitempty"`

	// Connect bounds a connection attempt to an endpoint, from 10ms to
	// 1m; a failed attempt is tried on an endpoint of another cluster.
	//
	// +optional
	// +kubebuilder:default="1s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10ms') && duration(self) <= duration('1m')",message="connect must be from 10ms to 1m"
	Connect gwv1.Duration `json:"connect,omitempty"`
}

// Finalizer and condition types and reasons of a MultiClusterLoadBalancer.
const (
	// LoadBalancerFinalizer holds a load balancer until its provider has
	// withdrawn it.
	LoadBalancerFinalizer = "networking.fleetnet.dev/load-balancer-cleanup"

	LoadBalancerConditionAccepted     = "Accepted"
	LoadBalancerConditionResolvedRefs = "ResolvedRefs"
	LoadBalancerConditionProgrammed   = "Programmed"

	LoadBalancerReasonAccepted = "Accepted"
	// LoadBalancerReasonInvalid: a field has a value the controller
	// refuses; the message names it.
	LoadBalancerReasonInvalid = "Invalid"
	// LoadBalancerReasonUnsupportedClass: no provider of the class runs.
	LoadBalancerReasonUnsupportedClass = "UnsupportedClass"
	// LoadBalancerReasonPortConflict: an older load balancer or a Gateway
	// listener of the same provider has the port, or the edges reserve it
	// for themselves.
	LoadBalancerReasonPortConflict = "PortConflict"
	// LoadBalancerReasonPortUnavailable (Programmed=False): an edge
	// cannot bind a port (in use there); the other ports are served.
	LoadBalancerReasonPortUnavailable = "PortUnavailable"
	LoadBalancerReasonResolvedRefs    = "ResolvedRefs"
	// LoadBalancerReasonBackendNotFound: the ServiceImport, or a port of
	// it, does not exist.
	LoadBalancerReasonBackendNotFound = "BackendNotFound"
	// LoadBalancerReasonProtocolMismatch: the ServiceImport's port has
	// another protocol.
	LoadBalancerReasonProtocolMismatch = "ProtocolMismatch"
	LoadBalancerReasonProgrammed       = "Programmed"
	LoadBalancerReasonPending          = "Pending"
)

// Backend states of a cluster.
const (
	// ClusterStateHealthy: the cluster has endpoints that take
	// connections.
	ClusterStateHealthy = "Healthy"
	// ClusterStateDraining: spec.clusters drains it.
	ClusterStateDraining = "Draining"
	// ClusterStateMissing: spec.clusters names it, but it exports no
	// ready endpoint of the ServiceImport.
	ClusterStateMissing = "Missing"
)

// ClusterBackendStatus is how one cluster serves the load balancer.
type ClusterBackendStatus struct {
	// Name is the cluster's id.
	Name string `json:"name"`
	// State is Healthy, Draining or Missing.
	State string `json:"state"`
	// Weight is the cluster's weight in use.
	Weight int32 `json:"weight"`
	// ReadyEndpoints is how many ready endpoint addresses it exports.
	ReadyEndpoints int32 `json:"readyEndpoints"`
}

// MultiClusterLoadBalancerStatus is what fleetnet-gateway made of it.
type MultiClusterLoadBalancerStatus struct {
	// Conditions: Accepted, ResolvedRefs and Programmed, with
	// observedGeneration.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Addresses are the global addresses the ports are served on.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Addresses []string `json:"addresses,omitempty"`

	// Ports are the served ports as kubectl shows them, e.g.
	// "5432/TCP,53/UDP" (a printer column shows one value of a list only).
	// +optional
	Ports string `json:"ports,omitempty"`

	// HealthyClusters is how many clusters are Healthy.
	// +optional
	HealthyClusters int32 `json:"healthyClusters,omitempty"`

	// Clusters are the backend clusters, sorted by name.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	Clusters []ClusterBackendStatus `json:"clusters,omitempty"`
}

// MultiClusterLoadBalancerList is a list of MultiClusterLoadBalancer.
//
// +kubebuilder:object:root=true
type MultiClusterLoadBalancerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MultiClusterLoadBalancer `json:"items"`
}
