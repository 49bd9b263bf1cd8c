package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is fleetnet's networking API group.
const GroupName = "networking.fleetnet.dev"

var (
	// SchemeGroupVersion is the group and version of this package's types.
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &BackendTrafficPolicy{}, &BackendTrafficPolicyList{},
		&MultiClusterLoadBalancer{}, &MultiClusterLoadBalancerList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

// Resource returns the group and resource of a resource of this package,
// as generated listers and clients need it for errors.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}
