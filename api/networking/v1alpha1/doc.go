// Package v1alpha1 holds fleetnet's own networking API, the group
// networking.fleetnet.dev: BackendTrafficPolicy, how the global entry point
// checks, retries and spreads traffic over the endpoints of a Service or a
// ServiceImport, and MultiClusterLoadBalancer, one global L4 entry point
// for an imported service.
//
// +kubebuilder:object:generate=true
// +k8s:openapi-gen=true
// +groupName=networking.fleetnet.dev
package v1alpha1
