package v1alpha1

import "cmp"

// ComparePrecedence orders BackendTrafficPolicies by how conflicts between
// them resolve (Gateway API policy attachment, GEP-713): the older first,
// then by namespace and name. The policy first in this order holds a
// target that several name, wherever policies are applied (the gateway's
// model and the agents' locality).
func ComparePrecedence(x, y *BackendTrafficPolicy) int {
	return cmp.Or(x.CreationTimestamp.Compare(y.CreationTimestamp.Time),
		cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
}

// Matches reports whether the failover step names the cluster or its
// region.
func (t FailoverTarget) Matches(cluster, region string) bool {
	return (t.Cluster != "" && t.Cluster == cluster) || (t.Region != "" && t.Region == region)
}
