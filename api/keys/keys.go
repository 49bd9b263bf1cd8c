// Package keys defines, once, every label, annotation, finalizer, field
// manager, condition type and reason that fleetnet writes or reads. Keys of
// the Multi-Cluster Services API itself come from sigs.k8s.io/mcs-api.
package keys

// Field managers for server-side apply.
const (
	// FieldManagerInstaller owns the CRDs that fleetnet installs.
	FieldManagerInstaller = "fleetnet-installer"
)

// Identities in the fleet's client certificates: the certificate's common
// name is the identity's name, and its organization says what it is.
const (
	// OrganizationClusters marks a member cluster's certificate; the common
	// name is the cluster id.
	OrganizationClusters = "fleetnet:clusters"
	// OrganizationAdmins marks an administrator's certificate.
	OrganizationAdmins = "fleetnet:admins"
)
