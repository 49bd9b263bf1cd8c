package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// BackendTrafficPolicy sets how the global entry point checks, retries and
// spreads traffic over the endpoints of Services and ServiceImports: a
// direct policy of Gateway API policy attachment (GEP-713), attached by
// targetRefs to backends in its own namespace. When two policies target
// the same backend, the older one applies there (then the one first by
// name) and the other is Conflicted.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=btp,categories=fleetnet;gateway-api
// +kubebuilder:metadata:labels="gateway.networking.k8s.io/policy=Direct"
// +kubebuilder:printcolumn:name="Locality",type=string,JSONPath=`.spec.locality`
// +kubebuilder:printcolumn:name="Health check",type=string,JSONPath=`.spec.healthCheck.type`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].reason`,priority=1
type BackendTrafficPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BackendTrafficPolicySpec   `json:"spec"`
	Status BackendTrafficPolicyStatus `json:"status,omitempty"`
}

// BackendTrafficPolicySpec is what the policy sets; what it leaves unset
// keeps fleetnet's defaults.
//
// +kubebuilder:validation:XValidation:rule="!has(self.failover) || (has(self.locality) && self.locality == 'LocalFirst')",message="failover needs locality LocalFirst"
type BackendTrafficPolicySpec struct {
	// TargetRefs are the Services (group "") and ServiceImports (group
	// multicluster.x-k8s.io) in the policy's namespace that it applies to.
	//
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(r, (r.group == '' && r.kind == 'Service') || (r.group == 'multicluster.x-k8s.io' && r.kind == 'ServiceImport'))",message="each targetRef must be a Service (group \"\") or a ServiceImport (group multicluster.x-k8s.io)"
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, a.group == b.group && a.kind == b.kind && a.name == b.name))",message="targetRefs must be unique"
	TargetRefs []gwv1.LocalPolicyTargetReference `json:"targetRefs"`

	// HealthCheck is the active check of every endpoint.
	// +optional
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`

	// PassiveHealthCheck ejects endpoints on the responses forwarding
	// sees.
	// +optional
	PassiveHealthCheck *PassiveHealthCheck `json:"passiveHealthCheck,omitempty"`

	// Retry sends failed idempotent requests again, each time to a cluster
	// not tried yet while one remains.
	// +optional
	Retry *Retry `json:"retry,omitempty"`

	// Timeouts bound connections and requests to endpoints.
	// +optional
	Timeouts *Timeouts `json:"timeouts,omitempty"`

	// Locality chooses how traffic spreads over clusters: Weighted (by the
	// exporting clusters' fleetnet.dev/weight and their ready endpoints)
	// or LocalFirst (at the edge, to the clusters of the serving edge's
	// region while any of their endpoints is healthy, then along failover,
	// then Weighted over the others; inside the fleet, to the importing
	// cluster's own endpoints, see failover).
	//
	// +optional
	// +kubebuilder:default=Weighted
	Locality LocalityMode `json:"locality,omitempty"`

	// Failover orders where traffic goes when the closest clusters cannot
	// take it. Only with locality LocalFirst. Inside the fleet, each
	// importing cluster applies it to its own clients of a targeted
	// ServiceImport's ClusterSetIP through EndpointSlice zone hints
	// (kube-proxy's PreferSameZone): traffic stays in the cluster while it
	// has minReadyEndpoints ready endpoints, then goes to the other
	// clusters of its region, then to each entry of order in turn, and to
	// every cluster when none has enough. kube-proxy follows zone hints
	// only on nodes whose zone label it knows: kube-proxy v1.37 can miss
	// it at start (docs/decisions/0160-kube-proxy-zone-race.md),
	// which a restart of that node's kube-proxy clears; the
	// ServiceImport's Locality condition says which hints the agent
	// wrote, not what each node's kube-proxy does. At the edge, traffic leaves the
	// edge's region for each entry of order in turn while one has a
	// healthy endpoint, then goes to every cluster by weight.
	//
	// +optional
	Failover *Failover `json:"failover,omitempty"`
}

// Failover is the order in which clusters take a ServiceImport's traffic
// when closer ones have too few ready endpoints.
type Failover struct {
	// MinReadyEndpoints is how many ready endpoints a cluster, or a group
	// of clusters, needs to take the traffic of the clusters that prefer
	// it: fewer, and traffic goes on to the next, so that a failing
	// cluster's last pods are not flooded with all of its clients. Counted
	// in the import's primary IP family; only the importing agents read
	// it (the edge's health checks take out what fails).
	//
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MinReadyEndpoints int32 `json:"minReadyEndpoints,omitempty"`

	// Order lists, after the importing cluster and its region, the
	// regions and clusters that take its traffic, most preferred first.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Order []FailoverTarget `json:"order,omitempty"`
}

// FailoverTarget is one step of a failover order: a region or a cluster.
//
// +kubebuilder:validation:XValidation:rule="has(self.region) != has(self.cluster)",message="exactly one of region and cluster must be set"
type FailoverTarget struct {
	// Region is the region of exporting clusters (their agents' --region).
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	Region string `json:"region,omitempty"`

	// Cluster is the id of an exporting cluster.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Cluster string `json:"cluster,omitempty"`
}

// LocalityMode is how traffic spreads over the clusters of a backend.
//
// +kubebuilder:validation:Enum=Weighted;LocalFirst
type LocalityMode string

// Locality modes.
const (
	LocalityWeighted   LocalityMode = "Weighted"
	LocalityLocalFirst LocalityMode = "LocalFirst"
)

// HealthCheckType is how an endpoint is checked.
//
// +kubebuilder:validation:Enum=TCP;HTTP
type HealthCheckType string

// Health check types.
const (
	HealthCheckTCP  HealthCheckType = "TCP"
	HealthCheckHTTP HealthCheckType = "HTTP"
)

// HealthCheck is the active check of every endpoint: UnhealthyThreshold
// failures in a row take an endpoint out of service, HealthyThreshold
// successes bring it back.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'HTTP' ? has(self.http) : !has(self.http)",message="http is required when type is HTTP and not allowed otherwise"
// +kubebuilder:validation:XValidation:rule="duration(self.timeout) < duration(self.interval)",message="timeout must be shorter than interval"
type HealthCheck struct {
	// Type is TCP (a connection is accepted) or HTTP (a GET answers
	// 200–399).
	//
	// +optional
	// +kubebuilder:default=TCP
	Type HealthCheckType `json:"type,omitempty"`

	// HTTP sets the request of an HTTP check.
	// +optional
	HTTP *HTTPHealthCheck `json:"http,omitempty"`

	// Interval is the time between two checks of an endpoint, from 100ms
	// to 5m.
	//
	// +optional
	// +kubebuilder:default="500ms"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('5m')",message="interval must be from 100ms to 5m"
	Interval gwv1.Duration `json:"interval,omitempty"`

	// Timeout is how long a check may take, at least 10ms and shorter than
	// the interval.
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

// HTTPHealthCheck is the request of an HTTP health check.
type HTTPHealthCheck struct {
	// Path is the request's path, starting with "/".
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/[^\s?#]*$`
	Path string `json:"path"`

	// Hostname is the request's Host header; the endpoint's address when
	// unset.
	// +optional
	Hostname *gwv1.PreciseHostname `json:"hostname,omitempty"`
}

// PassiveHealthCheck ejects endpoints on what forwarding sees. A failed
// connection always takes an endpoint out at once, until the active check
// brings it back.
type PassiveHealthCheck struct {
	// Consecutive5xx is the 5xx responses in a row from one endpoint that
	// take it out of service; 0 never does.
	//
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Consecutive5xx *int32 `json:"consecutive5xx,omitempty"`

	// EjectionTime is how long an endpoint taken out for 5xx responses
	// stays out before the active check may bring it back, from 1s to 1h.
	//
	// +optional
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="ejectionTime must be from 1s to 1h"
	EjectionTime gwv1.Duration `json:"ejectionTime,omitempty"`
}

// Retry sends an idempotent request (GET, HEAD, OPTIONS, TRACE, PUT,
// DELETE, with a body that can be sent again) once more when an attempt
// fails before a response or answers with one of Codes.
type Retry struct {
	// Attempts is how many times a request is sent again; 0 turns retries
	// off.
	//
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=5
	Attempts *int32 `json:"attempts,omitempty"`

	// Codes are the response codes, 400 to 599, that are retried besides
	// failures before a response.
	//
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Minimum=400
	// +kubebuilder:validation:items:Maximum=599
	Codes []int32 `json:"codes,omitempty"`
}

// Timeouts bound connections and requests to endpoints.
type Timeouts struct {
	// Connect bounds a connection attempt to an endpoint, from 10ms to
	// 1m; a failed attempt is retried on another cluster.
	//
	// +optional
	// +kubebuilder:default="1s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10ms') && duration(self) <= duration('1m')",message="connect must be from 10ms to 1m"
	Connect gwv1.Duration `json:"connect,omitempty"`

	// BackendRequest bounds each attempt of a request to an endpoint when
	// the HTTPRoute rule sets no timeouts.backendRequest; none when unset.
	//
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1ms')",message="backendRequest must be at least 1ms"
	BackendRequest *gwv1.Duration `json:"backendRequest,omitempty"`
}

// BackendTrafficPolicyStatus is what fleetnet-gateway made of the policy.
type BackendTrafficPolicyStatus struct {
	// Conditions: Accepted (reasons Accepted, Invalid, Conflicted,
	// TargetNotFound), with observedGeneration.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Ancestors are the Gateways whose routes send traffic to a target of
	// the policy, each with the policy's Accepted condition there, as
	// Gateway API policy attachment reports a policy.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Ancestors []gwv1.PolicyAncestorStatus `json:"ancestors,omitempty"`
}

// BackendTrafficPolicyList is a list of BackendTrafficPolicy.
//
// +kubebuilder:object:root=true
type BackendTrafficPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackendTrafficPolicy `json:"items"`
}
