// Package keys defines, once, every label, annotation, finalizer, field
// manager, condition type and reason that fleetnet writes or reads. Keys of
// the Multi-Cluster Services API itself come from sigs.k8s.io/mcs-api.
package keys

import "strings"

// Field managers for server-side apply.
const (
	// FieldManagerInstaller owns the CRDs that fleetnet installs.
	FieldManagerInstaller = "fleetnet-installer"
)

// ClustersetZone is KEP-1645's DNS zone of the clusterset's services:
// <service>.<namespace>.svc.clusterset.local.
const ClustersetZone = "clusterset.local"

// Identities in the fleet's client certificates: the certificate's common
// name is the identity's name, and its organization says what it is.
const (
	// OrganizationClusters marks a member cluster's certificate; the common
	// name is the cluster id.
	OrganizationClusters = "fleetnet:clusters"
	// OrganizationAdmins marks an administrator's certificate.
	OrganizationAdmins = "fleetnet:admins"
	// OrganizationEdges marks a fleetnet-edge's certificate; the common
	// name is the edge's name.
	OrganizationEdges = "fleetnet:edges"
	// OrganizationConsole marks a certificate that may look at
	// fleetnet-console (read-only; so may an administrator's); the common
	// name is who looks.
	OrganizationConsole = "fleetnet:console"
)

// Agent keys.
const (
	// FieldManagerAgent owns the objects the agent applies.
	FieldManagerAgent = "fleetnet-agent"
	// FieldManagerAgentStatus owns the status the agent applies.
	FieldManagerAgentStatus = "fleetnet-agent-status"

	// FinalizerServiceExport keeps a ServiceExport until its export is
	// withdrawn from the registry.
	FinalizerServiceExport = "fleetnet.dev/service-export"

	// LabelExport on a Service ("true") makes the agent create a managed
	// ServiceExport for it.
	LabelExport = "fleetnet.dev/export"
	// LabelAutoExport marks a ServiceExport the agent created for a labelled
	// Service; only those are ever removed by the agent.
	LabelAutoExport = "fleetnet.dev/auto-export"

	// AnnotationWeight on a ServiceExport is the cluster's weight for global
	// load balancing: an integer from 0 (drain) to 1000, default 1. The
	// agent copies it onto the EndpointSlices it imports from that cluster.
	AnnotationWeight = "fleetnet.dev/weight"

	// AnnotationRegionalFrontend is the cloud resource id of the regional
	// load balancer frontend that serves an exported Service of type
	// LoadBalancer in its cluster (on Azure, the frontend IP configuration
	// of the cluster's public Standard load balancer), which a cross-region
	// load balancer uses as a backend. On a ServiceExport it overrides
	// what the agent discovers; the agent copies it onto the EndpointSlices
	// it imports from that cluster.
	AnnotationRegionalFrontend = "fleetnet.dev/regional-frontend"

	// AnnotationExportTo on a ServiceExport scopes it: the ids of the
	// clusters (comma-separated) that may import the Service from this
	// export, besides the exporting cluster. The registry sends the
	// export's endpoints to no other cluster. Absent: every cluster.
	AnnotationExportTo = "fleetnet.dev/export-to"
	// AnnotationExportToSelector on a ServiceExport scopes it by a label
	// selector (`env=prod,tier in (a,b)`) over the clusters' properties,
	// which each agent publishes from its ClusterProperty objects: the
	// clusters it matches may import the Service from this export,
	// besides the exporting cluster and those AnnotationExportTo names
	// (the scope is their union). The registry evaluates it, and follows
	// the clusters' properties as they change.
	AnnotationExportToSelector = "fleetnet.dev/export-to-selector"

	// AnnotationPrivateLinkService is the resource id of the Azure Private
	// Link Service in front of the internal load balancer that serves an
	// exported Service, through which Azure Front Door Premium reaches the
	// cluster without a public address. On a ServiceExport it overrides
	// what the agent derives from cloud-provider-azure's
	// service.beta.kubernetes.io/azure-pls-* annotations; the agent copies
	// it onto the EndpointSlices it imports from that cluster.
	AnnotationPrivateLinkService = "fleetnet.dev/private-link-service"
	// AnnotationPLSApproval on a ServiceExport is "auto" or "manual"
	// (default): with "auto", the owner of the Service's Private Link
	// Service lets the fleet's gateway controller approve Azure Front
	// Door's private endpoint connection to it; with "manual" the
	// connection waits for the owner's approval. The agent copies "auto"
	// onto the EndpointSlices it imports from that cluster.
	AnnotationPLSApproval = "fleetnet.dev/pls-approval"
	// PLSApprovalAuto and PLSApprovalManual are AnnotationPLSApproval's
	// values.
	PLSApprovalAuto   = "auto"
	PLSApprovalManual = "manual"

	// PropertyNetwork is the ClusterProperty that names a cluster's
	// network (a label value; absent or empty: the fleet's one network).
	// Clusters of one network reach each other's pods directly; a cluster
	// reaches another network's only through that cluster's east-west
	// gateway, and its imports never hold their pod addresses.
	PropertyNetwork = "network.fleetnet.dev"
	// AnnotationEastWestPorts on a derived Service records the ports of
	// this cluster's east-west gateway that carry the import's TCP ports,
	// "<service port>=<gateway port>,...", while some of its exporting
	// clusters are on another network: the allocation is read back from
	// it, so it stays the same across the agent's restarts.
	AnnotationEastWestPorts = "fleetnet.dev/eastwest-ports"

	// EndpointSliceManagedBy is the endpointslice.kubernetes.io/managed-by
	// value of the EndpointSlices the agent imports.
	EndpointSliceManagedBy = "agent.fleetnet.dev"

	// LeaderElectionID names the agent's leader election Lease.
	LeaderElectionID = "fleetnet-agent"
)

// Reasons of the agent's Warning events about the cluster itself, on its
// ClusterProperty (identity from ClusterProperty objects) or its leader
// election Lease.
const (
	// ReasonRegistryRefused: the registry refuses the agent's
	// registration or renewal for a reason retrying does not cure (its
	// certificate, its permissions, a malformed request).
	ReasonRegistryRefused = "RegistryRefused"
	// ReasonClusterPropertyIgnored: a ClusterProperty is not published
	// with the cluster's registration (so no export's
	// fleetnet.dev/export-to-selector can match it): its name is not a
	// label key, its value not a label value, or it is beyond the
	// registry's bounds. The message names it and its value.
	ReasonClusterPropertyIgnored = "ClusterPropertyIgnored"
)

// Condition reasons of ServiceExport that the mcs-api does not define.
const (
	// ReasonInvalidRegionalFrontend: the fleetnet.dev/regional-frontend
	// annotation is not a resource id.
	ReasonInvalidRegionalFrontend = "InvalidRegionalFrontend"
	// ReasonInvalidExportScope: the fleetnet.dev/export-to annotation is
	// not a list of cluster ids (Valid=False).
	ReasonInvalidExportScope = "InvalidExportScope"
	// ReasonInvalidExportSelector: the fleetnet.dev/export-to-selector
	// annotation is not a label selector, or selects every cluster
	// (Valid=False).
	ReasonInvalidExportSelector = "InvalidExportSelector"
	// ReasonInvalidPrivateLink: the fleetnet.dev/private-link-service or
	// fleetnet.dev/pls-approval annotation is malformed (Valid=False).
	ReasonInvalidPrivateLink = "InvalidPrivateLink"
	// ReasonInvalidWeight: the fleetnet.dev/weight annotation is not an
	// integer from 0 to 1000 (Valid=False).
	ReasonInvalidWeight = "InvalidWeight"
	// ReasonRegistryRejected: the registry refused the export (Valid=False).
	ReasonRegistryRejected = "RegistryRejected"
	// ReasonReservedExportKey: spec.exportedLabels or spec.exportedAnnotations
	// names a reserved key (Valid=False); see ReservedExportKey.
	ReasonReservedExportKey = "ReservedExportKey"
	// ReasonInvalidExportedMetadata: an exported label or annotation is not
	// a valid key or value (Valid=False).
	ReasonInvalidExportedMetadata = "InvalidExportedMetadata"
	// ReasonRegistryUnavailable: the export could not be published yet
	// (Ready=False).
	ReasonRegistryUnavailable = "RegistryUnavailable"
)

// Import keys.
const (
	// LabelManagedBy marks the objects the agent imports (ServiceImports and
	// derived Services); others of the same name block the import.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByAgent is the LabelManagedBy value of the agent's objects.
	ManagedByAgent = "fleetnet-agent"
	// DerivedServicePrefix starts the name of every derived Service.
	DerivedServicePrefix = "derived-"
	// AnnotationDerivedService on a ServiceImport names its derived Service
	// in the same namespace (`kubectl get serviceimports -o wide` shows it),
	// since derived-<hash> cannot be guessed from the import's name.
	AnnotationDerivedService = "fleetnet.dev/derived-service"
)

// Condition types and reasons of ServiceImport that the mcs-api does not
// define.
const (
	// ConditionConflict on a ServiceImport is True when the exporting
	// clusters disagree; the reason is the first conflict's (PortConflict,
	// TypeConflict, ...) and the message names every cluster and field.
	ConditionConflict = "Conflict"
	// ReasonNoConflicts: the exporting clusters agree (Conflict=False).
	ReasonNoConflicts = "NoConflicts"
	// ReasonApplyFailed: a step of materialising the import failed
	// (Ready=False); the message names the step.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonInvalidPorts: the import's ports mix unnamed and named ports,
	// which no Service can hold (Ready=False).
	ReasonInvalidPorts = "InvalidPorts"
	// ReasonBlocked: a Service or ServiceImport of the import's name exists
	// that the agent does not manage.
	ReasonBlocked = "Blocked"

	// ConditionNetworks on a ServiceImport is present while some of its
	// exporting clusters are on another network than this cluster's
	// (keys.PropertyNetwork): True when all of them are reached (through
	// the east-west gateway), False when some cannot be, naming them.
	ConditionNetworks = "Networks"
	// ReasonThroughEastWestGateway: the import's traffic goes through this
	// cluster's east-west gateway, which reaches the clusters of other
	// networks through theirs (Networks=True).
	ReasonThroughEastWestGateway = "ThroughEastWestGateway"
	// ReasonClustersUnreachable: some exporting clusters are on another
	// network and cannot be reached from here (no east-west gateway here
	// or there, a headless import, or only UDP or SCTP ports); the message
	// names each with the cause (Networks=False). The rest are served.
	ReasonClustersUnreachable = "ClustersUnreachable"

	// ConditionLocality on a ServiceImport targeted by a
	// BackendTrafficPolicy with locality LocalFirst says which clusters
	// take its ClusterSetIP traffic from this cluster; True while the
	// EndpointSlices' zone hints express the policy. The agent sees the
	// hints it wrote, not the data plane: its messages say "zone hints
	// written" where traffic depends on kube-proxy following them.
	ConditionLocality = "Locality"
	// ReasonLocalCluster: this cluster's own endpoints take the traffic.
	ReasonLocalCluster = "LocalCluster"
	// ReasonFailedOver: this cluster has too few ready endpoints; the
	// message names the clusters that take the traffic.
	ReasonFailedOver = "FailedOver"
	// ReasonNearest: this cluster (and the steps before the chosen one)
	// export nothing; the message names the clusters that take the
	// traffic.
	ReasonNearest = "Nearest"
	// ReasonAllClusters: no step of the failover order has enough ready
	// endpoints; every cluster takes traffic.
	ReasonAllClusters = "AllClusters"
	// ReasonNoZones: no node of this cluster has a zone label, without
	// which kube-proxy cannot prefer endpoints (Locality=False).
	ReasonNoZones = "NoZones"
	// ReasonTooManyZones: the cluster's nodes are in more zones than an
	// endpoint's hints may name (Locality=False).
	ReasonTooManyZones = "TooManyZones"
	// ReasonHintsNotWritten: the decision's zone hints are not on the
	// EndpointSlices because a step of the import failed (Locality=Unknown;
	// the message names the step).
	ReasonHintsNotWritten = "HintsNotWritten"
	// ZoneHintElsewhere is the zone hint of endpoints that are not to
	// take this cluster's traffic: a zone no node has, so that every
	// ready endpoint carries a hint and kube-proxy honours them.
	ZoneHintElsewhere = "fleetnet.dev-other-clusters"
	// AnnotationTopologyMode is Kubernetes' topology-aware routing
	// annotation (k8s.io/api's corev1.AnnotationTopologyMode), which the agent sets
	// to TopologyModeAuto on the derived Service of an import under a
	// LocalFirst policy, beside trafficDistribution PreferClose: data
	// planes that read the annotation rather than the field (Cilium's
	// kube-proxy replacement, older data planes) then honour the slices'
	// zone hints. Removed with the policy. (Spelt out to keep this
	// package free of dependencies; a test of the importer compares it.)
	AnnotationTopologyMode = "service.kubernetes.io/topology-mode"
	// TopologyModeAuto is AnnotationTopologyMode's value that asks for
	// hints to be honoured.
	TopologyModeAuto = "Auto"
)

// Keys of the local development fleet (`fleetnetctl dev`).
const (
	// FieldManagerDev applies the namespaces, Deployments, StatefulSets and
	// Services of `fleetnetctl dev serve`.
	FieldManagerDev = "fleetnetctl-dev"
)

// Keys of fleetnetctl's changes to a cluster (`fleetnetctl dns wire`,
// `fleetnetctl fleet init/join/leave`).
const (
	// FieldManagerCtl writes what fleetnetctl changes in a cluster: the
	// CoreDNS Corefile's clusterset forward, and the namespace, Secrets and
	// fleet ConfigMap of `fleet init` and `fleet join`.
	FieldManagerCtl = "fleetnetctl"
	// ManagedByCtl is the LabelManagedBy value of what `fleet init` and
	// `fleet join` made besides Helm's releases (the namespace when it did
	// not exist, the certificates' Secrets, the fleet ConfigMap): `fleet
	// leave` deletes only what carries it.
	ManagedByCtl = "fleetnetctl"
	// FleetConfigMap, in the hub's fleetnet namespace, says how to join the
	// fleet (`fleet init` writes it, `fleet join --hub-context` reads it),
	// under the keys FleetKey*.
	FleetConfigMap = "fleetnet-fleet"
	// FleetKeyClustersetID is the clusterset's id.
	FleetKeyClustersetID = "clustersetID"
	// FleetKeyRegistryAddress is host:port of the registry as members dial it.
	FleetKeyRegistryAddress = "registryAddress"
	// FleetKeyImageRepository is the prefix of the fleet's images
	// (<prefix>/fleetnet-agent); empty for the charts' default.
	FleetKeyImageRepository = "imageRepository"
	// FleetKeyVersion is the images' tag; empty for the charts' appVersion.
	FleetKeyVersion = "version"
	// AnnotationRestartedAt on a Deployment's pod template restarts it,
	// as `kubectl rollout restart` does with the same key.
	AnnotationRestartedAt = "kubectl.kubernetes.io/restartedAt"
)

// Exported labels and annotations (spec.exportedLabels and
// spec.exportedAnnotations of a ServiceExport) become the ServiceImport's
// own in every importing cluster. Keys under these prefixes are refused:
// they are Kubernetes', the MCS API's and fleetnet's, and the agent's own
// keys on the ServiceImport must never be overwritten by an exporter.
var ReservedExportPrefixes = []string{"fleetnet.dev/", "multicluster.kubernetes.io/", "kubernetes.io/", "k8s.io/"}

// ReservedExportKey returns the reserved prefix key starts with, or "".
// Subdomains of fleetnet.dev (agent.fleetnet.dev/...) and the agent's own
// label keys are reserved too; other subdomains of kubernetes.io
// (app.kubernetes.io/name, ...) are common user labels and stay allowed.
func ReservedExportKey(key string) string {
	for _, p := range ReservedExportPrefixes {
		if strings.HasPrefix(key, p) {
			return p
		}
	}
	if prefix, _, ok := strings.Cut(key, "/"); ok && strings.HasSuffix(prefix, ".fleetnet.dev") {
		return prefix + "/"
	}
	if key == LabelManagedBy {
		return key
	}
	return ""
}
