package app

// fleetnet-dns reads ServiceImports and the imported EndpointSlices, and
// nothing else; it writes nothing. `make generate` turns these markers into
// config/rbac/dns/role.yaml, and test/dns runs fleetnet-dns with exactly
// these permissions.
//
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=serviceimports,verbs=list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list;watch
