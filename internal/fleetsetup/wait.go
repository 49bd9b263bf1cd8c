package fleetsetup

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// pollInterval is how often waiting looks again.
const pollInterval = time.Second

// poll calls check until it says done, printing its status whenever it
// changes: progress, not a line per attempt. An error of check is a
// status too (the registry not reachable yet is waiting, not failure);
// the last one is returned when ctx ends.
func poll(ctx context.Context, out io.Writer, check func(context.Context) (done bool, status string, err error)) error {
	last, lastErr := "", error(nil)
	for {
		done, status, err := check(ctx)
		if err != nil {
			status, lastErr = err.Error(), err
		}
		if status != last && status != "" {
			fmt.Fprintln(out, status)
			last = status
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("%w (last: %v)", ctx.Err(), lastErr)
			}
			return fmt.Errorf("%w (last: %s)", ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

// waitWorkloads waits until every Deployment and StatefulSet of the
// releases in namespace runs its current version in at least one ready
// replica.
func (c *Cluster) waitWorkloads(ctx context.Context, namespace string, releases []string, out io.Writer) error {
	return poll(ctx, out, func(ctx context.Context) (bool, string, error) {
		var waiting []string
		total := 0
		for _, rel := range releases {
			sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + rel}
			deps, err := c.Kube.AppsV1().Deployments(namespace).List(ctx, sel)
			if err != nil {
				return false, "", fmt.Errorf("%s: listing Deployments: %w", c.Name, err)
			}
			for _, d := range deps.Items {
				total++
				if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < 1 || d.Status.AvailableReplicas < 1 {
					waiting = append(waiting, fmt.Sprintf("Deployment %s (%d/%d available)", d.Name, d.Status.AvailableReplicas, d.Status.Replicas))
				}
			}
			sts, err := c.Kube.AppsV1().StatefulSets(namespace).List(ctx, sel)
			if err != nil {
				return false, "", fmt.Errorf("%s: listing StatefulSets: %w", c.Name, err)
			}
			for _, s := range sts.Items {
				total++
				if s.Status.ObservedGeneration < s.Generation || s.Status.ReadyReplicas < 1 {
					waiting = append(waiting, fmt.Sprintf("StatefulSet %s (%d/%d ready)", s.Name, s.Status.ReadyReplicas, s.Status.Replicas))
				}
			}
		}
		if len(waiting) == 0 {
			return true, fmt.Sprintf("%s: %d workloads ready", c.Name, total), nil
		}
		return false, fmt.Sprintf("%s: waiting for %s", c.Name, strings.Join(waiting, ", ")), nil
	})
}

// adminName is the administrator fleetnetctl acts as towards the registry
// (waiting for a registration, evicting a leaving cluster).
const adminName = "fleetnetctl"

// dialRegistry connects to the registry as fleetnetctl's administrator,
// whose certificate it keeps in the certificates' folder beside the CA.
func dialRegistry(certsDir string, ca *pki.KeyPair, address string) (registryv1.RegistryClient, *grpc.ClientConn, error) {
	certPath := filepath.Join(certsDir, adminName+".crt")
	if old, err := os.ReadFile(certPath); err != nil || ca.Check(old, pki.Identity{CommonName: adminName, Organization: keys.OrganizationAdmins}, renewBefore) != nil {
		kp, err := ca.AdminCert(adminName)
		if err != nil {
			return nil, nil, err
		}
		if err := kp.Write(certsDir, adminName); err != nil {
			return nil, nil, fmt.Errorf("writing the administrator's certificate: %w", err)
		}
	}
	return client.Dial(client.Options{
		Address:   address,
		CAFile:    filepath.Join(certsDir, "ca.crt"),
		CertFile:  certPath,
		KeyFile:   filepath.Join(certsDir, adminName+".key"),
		Component: "fleetnetctl",
	})
}

// waitRegistered waits until the registry holds a live lease of the
// cluster.
func waitRegistered(ctx context.Context, reg registryv1.RegistryClient, address, clusterID string, out io.Writer) error {
	return poll(ctx, out, func(ctx context.Context) (bool, string, error) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := reg.ListClusters(cctx, &registryv1.ListClustersRequest{})
		if err != nil {
			return false, "", fmt.Errorf("registry %s: %w", address, err)
		}
		for _, c := range resp.GetClusters() {
			if c.GetId() == clusterID && c.GetLive() {
				return true, fmt.Sprintf("%s: registered in the registry at %s", clusterID, address), nil
			}
		}
		return false, fmt.Sprintf("%s: waiting for the cluster's agent to register at %s", clusterID, address), nil
	})
}

// waitImports waits until every import the registry sends the cluster
// (export scopes and its import policy applied) is in place in it: its ServiceImport made by the agent, with its ClusterSetIP (a
// headless one needs none) and its derived Service. Imports whose namespace
// the cluster does not have wait for it (namespace sameness), unless the
// agent creates namespaces; they are named but not waited for.
func (c *Cluster) waitImports(ctx context.Context, reg registryv1.RegistryClient, clusterID string, createsNamespaces bool, importNamespaces []string, out io.Writer) error {
	policy := sets.New(importNamespaces...)
	return poll(ctx, out, func(ctx context.Context) (bool, string, error) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		// What the registry sends this cluster: export scopes applied.
		resp, err := reg.ListImports(cctx, &registryv1.ListImportsRequest{ClusterId: clusterID})
		if err != nil {
			return false, "", fmt.Errorf("listing the registry's imports: %w", err)
		}
		nsList, err := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", fmt.Errorf("%s: listing namespaces: %w", c.Name, err)
		}
		namespaces := sets.New[string]()
		for _, ns := range nsList.Items {
			namespaces.Insert(ns.Name)
		}
		var imports mcsv1beta1.ServiceImportList
		if err := c.Client.List(ctx, &imports, ctrlclient.MatchingLabels{keys.LabelManagedBy: keys.ManagedByAgent}); err != nil {
			return false, "", fmt.Errorf("%s: listing ServiceImports: %w", c.Name, err)
		}
		inPlace := sets.New[string]()
		for _, si := range imports.Items {
			if si.DeletionTimestamp == nil && si.Annotations[keys.AnnotationDerivedService] != "" &&
				(si.Spec.Type == mcsv1beta1.Headless || len(si.Spec.IPs) > 0) {
				inPlace.Insert(si.Namespace + "/" + si.Name)
			}
		}
		want, placed := 0, 0
		noNamespace := sets.New[string]()
		for _, imp := range resp.GetImports() {
			ns := imp.GetKey().GetNamespace()
			if policy.Len() > 0 && !policy.Has(ns) {
				continue // outside the cluster's import policy: never sent
			}
			if !namespaces.Has(ns) && !createsNamespaces {
				noNamespace.Insert(ns)
				continue
			}
			want++
			if inPlace.Has(ns + "/" + imp.GetKey().GetName()) {
				placed++
			}
		}
		status := fmt.Sprintf("%s: imports in place %d/%d", clusterID, placed, want)
		if noNamespace.Len() > 0 {
			status += fmt.Sprintf("; imports to namespaces this cluster does not have wait for them: %s", strings.Join(sets.List(noNamespace), ", "))
		}
		return placed == want, status, nil
	})
}
