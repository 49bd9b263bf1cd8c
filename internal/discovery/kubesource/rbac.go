package kubesource

// The kubernetes source reads EndpointSlices, cluster-wide, and nothing
// else; it writes nothing. These markers describe its ClusterRole for
// controller-gen (rbac:roleName=fleetnet-discovery
// paths=./internal/discovery/...); the tests run the source as a
// ServiceAccount holding exactly this.
//
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list;watch
