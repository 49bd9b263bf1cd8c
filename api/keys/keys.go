// Package keys defines, once, every label, annotation, finalizer, field
// manager, condition type and reason that fleetnet writes or reads. Keys of
// the Multi-Cluster Services API itself come from sigs.k8s.io/mcs-api.
package keys

// Field managers for server-side apply.
const (
	// FieldManagerInstaller owns the CRDs that fleetnet installs.
	FieldManagerInstaller = "fleetnet-installer"
)
