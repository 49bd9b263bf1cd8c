package kubesource

// The kubernetes source reads EndpointSlices and ServiceImports (their
// labels, with --pool-labels=serviceimports), cluster-wide, and nothing
// else; it writes nothing. These markers describe its ClusterRole for
// controller-gen (rbac:roleName=fleetnet-discovery
// paths=./internal/discovery/...); the tests run the source as a
// ServiceAccount holding exactly this.
//
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list;watch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=serviceimports,verbs=list;watch
