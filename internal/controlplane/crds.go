package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// InstallCRDs applies crds and waits until every one is Established and
// served by discovery: Established comes first, and a client that builds
// its REST mapping from discovery in between finds no such kind.
func InstallCRDs(ctx context.Context, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) error {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	force := true
	for _, crd := range crds {
		crd = crd.DeepCopy()
		crd.TypeMeta = metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}
		body, err := json.Marshal(crd)
		if err != nil {
			return err
		}
		if _, err := api.Patch(ctx, crd.Name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: keys.FieldManagerInstaller, Force: &force}); err != nil {
			return fmt.Errorf("applying CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", crd.Name, err)
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gv := crd.Spec.Group + "/" + v.Name
			var last error
			err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				list, err := dc.ServerResourcesForGroupVersion(gv)
				if err != nil {
					last = err
					return false, nil
				}
				for _, r := range list.APIResources {
					if r.Name == crd.Spec.Names.Plural {
						return true, nil
					}
				}
				last = fmt.Errorf("%s not listed", crd.Spec.Names.Plural)
				return false, nil
			})
			if err != nil {
				return fmt.Errorf("waiting for discovery to serve %s in %s: %w (last: %v)", crd.Spec.Names.Plural, gv, err, last)
			}
		}
	}
	return nil
}
