// Package v1alpha1 holds ClusterProperty, the about.k8s.io API of KEP-2149
// (ClusterId for ClusterSet identification). The agent reads its cluster id
// from the ClusterProperty named "cluster.clusterset.k8s.io" and its clusterset
// id from the one named "clusterset.k8s.io".
//
// about.k8s.io is a protected API group: the API server accepts the CRD only
// with the api-approved.kubernetes.io annotation, which points at the KEP.
//
// +kubebuilder:object:generate=true
// +k8s:openapi-gen=true
// +groupName=about.k8s.io
package v1alpha1
