package importer

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/agent/eastwest"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// gatewayPorts returns the local gateway's port of each carried service
// port of the import key, keeping the ones it holds. Before the first
// allocation the derived Services' records are read back, so that a
// restarted agent hands out the same ports.
func (r *Reconciler) gatewayPorts(ctx context.Context, key types.NamespacedName, d eastwest.Decision) (map[int32]int32, error) {
	got, err := r.EastWest.Ports.Assign(key, d.Carried, func() (map[types.NamespacedName]map[int32]int32, error) {
		list := &corev1.ServiceList{}
		if err := r.Client.List(ctx, list, client.MatchingLabels{keys.LabelManagedBy: keys.ManagedByAgent}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		out := map[types.NamespacedName]map[int32]int32{}
		for _, svc := range list.Items {
			v, ok := svc.Annotations[keys.AnnotationEastWestPorts]
			name := svc.Labels[mcsv1beta1.LabelServiceName]
			if !ok || name == "" {
				continue
			}
			ports, err := eastwest.ParsePorts(v)
			if err != nil {
				// Not ours to trust: the import gets new ports.
				r.Log.Info("ignoring an unreadable east-west ports annotation", "service", svc.Namespace+"/"+svc.Name, "err", err)
				continue
			}
			out[types.NamespacedName{Namespace: svc.Namespace, Name: name}] = ports
		}
		return out, nil
	})
	if err != nil {
		return nil, &stepError{"allocating the east-west gateway's ports", err}
	}
	return got, nil
}

// crossNetworks returns what the import's slices should hold, given how
// it crosses networks: desired itself when every exporter is on this
// network; only this network's clusters when the others cannot be
// reached; and, when the import goes through the gateway, the gateway's
// endpoints alone (as this cluster's), after recording the route the
// gateway serves.
func (r *Reconciler) crossNetworks(ctx context.Context, key types.NamespacedName, desired *Desired, d eastwest.Decision, ports map[int32]int32) (*Desired, error) {
	if !d.CrossesNetworks() {
		return desired, nil
	}
	if !d.Through {
		served := &Desired{Import: proto.CloneOf(desired.Import), Chunks: map[string]map[string]*registryv1.EndpointChunk{}}
		served.Import.Clusters = nil
		for _, c := range desired.Import.GetClusters() {
			if slices.Contains(d.Direct, c.GetClusterId()) {
				served.Import.Clusters = append(served.Import.Clusters, c)
				served.Chunks[c.GetClusterId()] = desired.Chunks[c.GetClusterId()]
			}
		}
		return served, nil
	}
	gw := r.EastWest.Service
	list := &discoveryv1.EndpointSliceList{}
	if err := r.Client.List(ctx, list, client.InNamespace(gw.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: gw.Name}); err != nil {
		return nil, &stepError{fmt.Sprintf("listing the EndpointSlices of the east-west gateway %s", gw), err}
	}
	// The gateway listens before the slices send anything to it.
	r.EastWest.Publisher.SetRoute(eastwest.Route{Key: key, Import: desired.Import, Chunks: maps.Clone(desired.Chunks), Decision: d, Ports: ports})
	served := &Desired{Import: proto.CloneOf(desired.Import)}
	served.Import.Clusters = []*registryv1.ImportCluster{{ClusterId: r.Cluster, Region: r.Region, Weight: 1}}
	served.Chunks = map[string]map[string]*registryv1.EndpointChunk{r.Cluster: eastwest.GatewayChunks(desired.Import, ports, list.Items)}
	return served, nil
}
