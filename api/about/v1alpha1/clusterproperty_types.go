package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Well-known ClusterProperty names of KEP-2149.
const (
	// ClusterIDPropertyName names the ClusterProperty whose value is this
	// cluster's id, unique within its clusterset.
	ClusterIDPropertyName = "cluster.clusterset.k8s.io"
	// ClusterSetPropertyName names the ClusterProperty whose value is the id of
	// the clusterset this cluster belongs to.
	ClusterSetPropertyName = "clusterset.k8s.io"
)

// ClusterPropertySpec holds the value of a property.
type ClusterPropertySpec struct {
	// Value is the property's value.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128000
	Value string `json:"value"`
}

// ClusterProperty is a name/value pair that describes the cluster it lives in
// (KEP-2149). It is cluster-scoped.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=https://github.com/kubernetes/enhancements/tree/master/keps/sig-multicluster/2149-clusterid"
// +kubebuilder:printcolumn:name="Value",type=string,JSONPath=`.spec.value`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterProperty struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec holds the property's value.
	Spec ClusterPropertySpec `json:"spec"`
}

// ClusterPropertyList is a list of ClusterProperty.
//
// +kubebuilder:object:root=true
type ClusterPropertyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterProperty `json:"items"`
}
