// Package scheme holds the runtime.Scheme that knows every type fleetnet
// reads or writes: the built-in Kubernetes types, the Multi-Cluster Services
// API (v1alpha1 and v1beta1), ClusterProperty, the Gateway API, fleetnet's networking.fleetnet.dev and
// CustomResourceDefinitions.
package scheme

import (
	aboutv1alpha1 "github.com/fleetnet/fleetnet/api/about/v1alpha1"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Scheme knows every type fleetnet uses.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(mcsv1alpha1.Install(Scheme))
	utilruntime.Must(mcsv1beta1.Install(Scheme))
	utilruntime.Must(aboutv1alpha1.AddToScheme(Scheme))
	utilruntime.Must(gwv1.Install(Scheme))
	utilruntime.Must(networkingv1alpha1.AddToScheme(Scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(Scheme))
}
