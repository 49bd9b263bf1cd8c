package kubesource

// The kubernetes source reads EndpointSlices (the imported ones, across
// namespaces, and the routers Service's) through informers, and nothing
// else; it writes nothing. `make generate` turns these markers into
// config/rbac/discovery/role.yaml, which the fleetnet-discovery chart binds
// (test/charts runs fleetnet-discovery as the chart's ServiceAccount).
//
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list;watch
