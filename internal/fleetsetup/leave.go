package fleetsetup

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/config/crd"
	"github.com/fleetnet/fleetnet/internal/pki"
	"helm.sh/helm/v3/pkg/chartutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// LeaveOptions configure leaving.
type LeaveOptions struct {
	// Namespace holds the releases.
	Namespace string
	// CertsDir holds the fleet CA, which makes fleetnetctl's administrator
	// certificate for the registry.
	CertsDir string
	// ClusterID and RegistryAddress default to the agent release's values.
	ClusterID, RegistryAddress string
	// DeleteCRDs also deletes the MCS, ClusterProperty and BackendTrafficPolicy CRDs, and with
	// them every ServiceExport left in the cluster.
	DeleteCRDs bool
	// Unwire, when set, takes the clusterset forward out of the cluster's
	// DNS; it runs once the exports are withdrawn, before the releases go.
	Unwire func(context.Context) error
}

// Leave takes a member out of the fleet: it stops the agent, has the
// registry withdraw the cluster's exports and registration (so that every
// other cluster stops sending to it while its Pods still serve), then
// removes what the agent made (imports, derived Services, slices, its
// finalizers on ServiceExports), the releases, and what Join made. The
// users' ServiceExports and Services stay; with DeleteCRDs the CRDs go too.
func Leave(ctx context.Context, m *Cluster, o LeaveOptions, out io.Writer) error {
	ns := o.Namespace
	// The hub does not leave: it holds the registry and the fleet.
	if hub, err := m.releaseValues(ns, "fleetnet-registry"); err != nil {
		return err
	} else if hub != nil {
		return fmt.Errorf("%s holds the fleet's registry (release %s/fleetnet-registry): the hub does not leave its own fleet; uninstall its releases with helm to take the fleet down", m.Name, ns)
	}
	vals, err := m.releaseValues(ns, "fleetnet-agent")
	if err != nil {
		return err
	}
	if o.ClusterID == "" {
		o.ClusterID = valueString(vals, "identity.clusterID")
	}
	if o.RegistryAddress == "" {
		o.RegistryAddress = valueString(vals, "registry.address")
	}
	if o.ClusterID == "" || o.RegistryAddress == "" {
		return fmt.Errorf("%s: no fleetnet-agent release in %s says the cluster's id and the registry's address: give --cluster-id and --registry-address", m.Name, ns)
	}

	// 1. The agent stops, so that it neither re-registers nor re-exports.
	if err := m.stopAgent(ctx, ns, out); err != nil {
		return err
	}
	// 2. The registry withdraws the cluster's exports and registration.
	ca, err := pki.LoadCA(caFiles(o.CertsDir))
	if err != nil {
		return fmt.Errorf("the fleet CA in --certs-dir=%s, which makes the administrator certificate that evicts the cluster: %w", o.CertsDir, err)
	}
	reg, conn, err := dialRegistry(o.CertsDir, ca, o.RegistryAddress)
	if err != nil {
		return err
	}
	defer conn.Close()
	exports, err := reg.ListExports(ctx, &registryv1.ListExportsRequest{ClusterId: o.ClusterID})
	if err != nil {
		return fmt.Errorf("registry %s: listing the exports of %s (nothing was removed; run again when the registry answers): %w", o.RegistryAddress, o.ClusterID, err)
	}
	if _, err := reg.EvictCluster(ctx, &registryv1.EvictClusterRequest{ClusterId: o.ClusterID}); err != nil {
		return fmt.Errorf("registry %s: evicting %s (the agent is stopped; run again when the registry answers): %w", o.RegistryAddress, o.ClusterID, err)
	}
	fmt.Fprintf(out, "%s: withdrawn from the registry at %s with its %d exports\n", o.ClusterID, o.RegistryAddress, len(exports.GetExports()))

	// 3. What the agent made, and its finalizers.
	if err := m.removeAgentObjects(ctx, ns, out); err != nil {
		return err
	}
	// 4. The DNS forward, the releases, then what Join made.
	if o.Unwire != nil {
		if err := o.Unwire(ctx); err != nil {
			return err
		}
	}
	for _, rel := range slices.Backward(memberReleases) {
		if removed, err := m.uninstall(ns, rel); err != nil {
			return err
		} else if removed {
			fmt.Fprintf(out, "%s: release %s/%s uninstalled\n", m.Name, ns, rel)
		}
	}
	if err := m.deleteIfOurs(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleetnet-agent-registry"}}, out); err != nil {
		return err
	}
	others, err := m.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil {
		return fmt.Errorf("%s: listing the Helm releases left in %s: %w", m.Name, ns, err)
	}
	if len(others.Items) > 0 {
		fmt.Fprintf(out, "%s: kept namespace %s: it holds %d more Helm release records\n", m.Name, ns, len(others.Items))
	} else if err := m.deleteIfOurs(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, out); err != nil {
		return err
	}
	crds, err := crd.All()
	if err != nil {
		return err
	}
	if !o.DeleteCRDs {
		fmt.Fprintf(out, "%s: kept the %d MCS, ClusterProperty and BackendTrafficPolicy CRDs and the ServiceExports (--delete-crds removes them)\n", m.Name, len(crds))
		return nil
	}
	for _, c := range crds {
		if err := ctrlclient.IgnoreNotFound(m.Client.Delete(ctx, c)); err != nil {
			return fmt.Errorf("%s: deleting CRD %s: %w", m.Name, c.Name, err)
		}
	}
	fmt.Fprintf(out, "%s: deleted the %d MCS, ClusterProperty and BackendTrafficPolicy CRDs\n", m.Name, len(crds))
	return nil
}

// stopAgent scales the agent's Deployment to 0 and waits until its Pods
// are gone.
func (c *Cluster) stopAgent(ctx context.Context, ns string, out io.Writer) error {
	deps := c.Kube.AppsV1().Deployments(ns)
	d, err := deps.Get(ctx, "fleetnet-agent", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: reading Deployment %s/fleetnet-agent: %w", c.Name, ns, err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
		patch := []byte(`{"spec":{"replicas":0}}`)
		if _, err := deps.Patch(ctx, d.Name, "application/merge-patch+json", patch, metav1.PatchOptions{FieldManager: keys.FieldManagerCtl}); err != nil {
			return fmt.Errorf("%s: scaling Deployment %s/%s to 0: %w", c.Name, ns, d.Name, err)
		}
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return err
	}
	return poll(ctx, out, func(ctx context.Context) (bool, string, error) {
		pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if err != nil {
			return false, "", fmt.Errorf("%s: listing the agent's Pods: %w", c.Name, err)
		}
		if n := len(pods.Items); n > 0 {
			return false, fmt.Sprintf("%s: stopping the agent (%d Pods left)", c.Name, n), nil
		}
		return true, fmt.Sprintf("%s: agent stopped", c.Name), nil
	})
}

// removeAgentObjects deletes the imports the agent made (ServiceImports,
// derived Services, EndpointSlices), the ServiceExports it made for
// labelled Services, its leader election Lease, and takes its finalizer off
// the users' ServiceExports, which no agent will finish any more.
func (c *Cluster) removeAgentObjects(ctx context.Context, ns string, out io.Writer) error {
	byAgent := ctrlclient.MatchingLabels{keys.LabelManagedBy: keys.ManagedByAgent}
	var autoExports, finalizers int
	var exports mcsv1beta1.ServiceExportList
	if err := c.Client.List(ctx, &exports); err != nil && !isNoKind(err) {
		return fmt.Errorf("%s: listing ServiceExports: %w", c.Name, err)
	}
	for i := range exports.Items {
		se := &exports.Items[i]
		// The finalizer first: a delete would otherwise only mark it, and
		// change the object under the patch.
		if slices.Contains(se.Finalizers, keys.FinalizerServiceExport) {
			patch := ctrlclient.MergeFromWithOptions(se.DeepCopy(), ctrlclient.MergeFromWithOptimisticLock{})
			se.Finalizers = slices.DeleteFunc(se.Finalizers, func(f string) bool { return f == keys.FinalizerServiceExport })
			if err := ctrlclient.IgnoreNotFound(c.Client.Patch(ctx, se, patch)); err != nil {
				return fmt.Errorf("%s: removing the finalizer of ServiceExport %s/%s (run again): %w", c.Name, se.Namespace, se.Name, err)
			}
			finalizers++
		}
		if se.Labels[keys.LabelAutoExport] != "" {
			if err := ctrlclient.IgnoreNotFound(c.Client.Delete(ctx, se)); err != nil {
				return fmt.Errorf("%s: deleting ServiceExport %s/%s: %w", c.Name, se.Namespace, se.Name, err)
			}
			autoExports++
		}
	}
	for _, del := range []struct {
		what string
		obj  ctrlclient.Object
		opts []ctrlclient.DeleteAllOfOption
	}{
		{"ServiceImports", &mcsv1beta1.ServiceImport{}, []ctrlclient.DeleteAllOfOption{byAgent}},
		{"EndpointSlices", &discoveryv1.EndpointSlice{}, []ctrlclient.DeleteAllOfOption{ctrlclient.MatchingLabels{discoveryv1.LabelManagedBy: keys.EndpointSliceManagedBy}}},
	} {
		if err := c.deleteAllNamespaces(ctx, del.obj, del.opts...); err != nil && !isNoKind(err) {
			return fmt.Errorf("%s: deleting %s: %w", c.Name, del.what, err)
		}
	}
	// Services cannot be deleted by collection: one by one.
	var services corev1.ServiceList
	if err := c.Client.List(ctx, &services, byAgent); err != nil {
		return fmt.Errorf("%s: listing derived Services: %w", c.Name, err)
	}
	for i := range services.Items {
		if err := ctrlclient.IgnoreNotFound(c.Client.Delete(ctx, &services.Items[i])); err != nil {
			return fmt.Errorf("%s: deleting derived Service %s/%s: %w", c.Name, services.Items[i].Namespace, services.Items[i].Name, err)
		}
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: keys.LeaderElectionID}}
	if err := ctrlclient.IgnoreNotFound(c.Client.Delete(ctx, lease)); err != nil {
		return fmt.Errorf("%s: deleting the agent's Lease: %w", c.Name, err)
	}
	fmt.Fprintf(out, "%s: the agent's imports deleted (%d derived Services with their ServiceImports and slices), its finalizer taken off %d ServiceExports, %d ServiceExports it made for labelled Services deleted\n",
		c.Name, len(services.Items), finalizers, autoExports)
	return nil
}

// deleteAllNamespaces deletes the objects of obj's kind matching opts in
// every namespace that has any.
func (c *Cluster) deleteAllNamespaces(ctx context.Context, obj ctrlclient.Object, opts ...ctrlclient.DeleteAllOfOption) error {
	nss, err := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, ns := range nss.Items {
		if err := c.Client.DeleteAllOf(ctx, obj, append(slices.Clone(opts), ctrlclient.InNamespace(ns.Name))...); err != nil {
			return err
		}
	}
	return nil
}

// deleteIfOurs deletes obj when fleetnetctl made it (LabelManagedBy).
func (c *Cluster) deleteIfOurs(ctx context.Context, obj ctrlclient.Object, out io.Writer) error {
	key := ctrlclient.ObjectKeyFromObject(obj)
	if err := c.Client.Get(ctx, key, obj); err != nil {
		return ctrlclient.IgnoreNotFound(err)
	}
	if !labels.Set(obj.GetLabels()).Has(keys.LabelManagedBy) || obj.GetLabels()[keys.LabelManagedBy] != keys.ManagedByCtl {
		return nil
	}
	if err := ctrlclient.IgnoreNotFound(c.Client.Delete(ctx, obj)); err != nil {
		return fmt.Errorf("%s: deleting %T %s: %w", c.Name, obj, key, err)
	}
	name := key.Name
	if key.Namespace != "" {
		name = key.String()
	}
	kind := "object"
	if gvk, err := c.Client.GroupVersionKindFor(obj); err == nil {
		kind = gvk.Kind
	}
	fmt.Fprintf(out, "%s: deleted %s %s, which fleetnetctl made\n", c.Name, kind, name)
	return nil
}

// isNoKind is true when the cluster does not serve the kind (the CRDs are
// gone).
func isNoKind(err error) bool {
	return apierrors.IsNotFound(err) || meta.IsNoMatchError(err)
}

// valueString is the string at a dotted path of Helm values, "" when
// there is none.
func valueString(values map[string]any, path string) string {
	v, _ := chartutil.Values(values).PathValue(path)
	s, _ := v.(string)
	return s
}
