package keys

// Keys of Karmada (karmada.io), read by fleetnet-discovery's kubernetes pool
// source with --slice-selection=karmada, so that it serves fleets whose
// multi-cluster services Karmada implements. They are Karmada's, not
// fleetnet's: the values follow karmada-io/karmada's pkg/util/constants.go,
// pkg/util/names and pkg/apis/work/v1alpha2.
const (
	// KarmadaEndpointSliceManagedBy is the endpointslice.kubernetes.io/managed-by
	// value of the EndpointSlices Karmada's endpointslice-controller derives
	// for a ServiceImport: named imported-<source cluster>-<source slice>,
	// labelled kubernetes.io/service-name=derived-<service>.
	KarmadaEndpointSliceManagedBy = "endpointslice-controller.karmada.io"
	// KarmadaDispatchEndpointSliceManagedBy is the managed-by value of the
	// EndpointSlices Karmada's endpointslice-dispatch-controller writes for a
	// MultiClusterService: named <source cluster>-<source slice>, labelled
	// with the Service's own name, the source cluster in
	// KarmadaAnnotationProvisionCluster.
	KarmadaDispatchEndpointSliceManagedBy = "endpointslice-dispatch-controller.karmada.io"
	// KarmadaImportedSlicePrefix starts the name of a derived EndpointSlice:
	// imported-<cluster>-<slice>.
	KarmadaImportedSlicePrefix = "imported-"
	// KarmadaDerivedServicePrefix starts the name of a derived Service:
	// derived-<service>.
	KarmadaDerivedServicePrefix = "derived-"
	// KarmadaAnnotationWorkNamespace names the Work an object came from;
	// on a derived EndpointSlice in Karmada's control plane that Work is in
	// the source cluster's execution namespace, karmada-es-<cluster>. (Once
	// propagated to a member cluster, Karmada overwrites it with the Work
	// that propagated it, which names the consuming cluster: it is only
	// believed where it agrees with the slice's name.)
	KarmadaAnnotationWorkNamespace = "work.karmada.io/namespace"
	// KarmadaExecutionSpacePrefix starts the name of a cluster's execution
	// namespace: karmada-es-<cluster>.
	KarmadaExecutionSpacePrefix = "karmada-es-"
	// KarmadaAnnotationProvisionCluster names the source cluster of an
	// EndpointSlice dispatched for a MultiClusterService.
	KarmadaAnnotationProvisionCluster = "endpointslice.karmada.io/provision-cluster"
)
