package agent_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	"github.com/fleetnet/fleetnet/internal/agent/app"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// TestLocality: hub (region eu, nodes in zones eu-a and eu-b) imports echo
// from itself (2 endpoints), east (eu, 1) and west (us, 2). A
// BackendTrafficPolicy with locality LocalFirst, 2 ready endpoints at
// least and failover to region us hints hub's endpoints for hub's zones
// and the others away; as hub's endpoints stop being ready traffic goes
// to the region (hub and east), then to us as well (every cluster: no
// hints); back ready, it returns. A new zone joins the hints; the policy's
// deletion takes them off. The ServiceImport's Locality condition and
// events say each step. The derived Service prefers close endpoints
// (trafficDistribution and topology-mode Auto) while the policy holds,
// written once, not at each decision; neither after, and a topology-mode
// set by someone else is left alone.
func TestLocality(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "hub"}}})
	r := registrytest.Start(t, server.Config{LeaseTTL: 10 * time.Minute})
	ctx := context.Background()
	hub := f.Cluster(t, "hub")
	c := hub.Client(t)
	createNamespace(t, c, ns)
	for _, z := range []string{"eu-a", "eu-b"} {
		createZonedNode(t, c, "node-"+z, z)
	}
	startAgent(t, hub, r, "hub", func(o *app.Options) { o.Identity.Region = "eu" })
	slice := endpointSlice(ns, "echo", "echo-1", "10.244.0.1", "10.244.0.2")
	for _, obj := range []client.Object{service(ns, "echo"), slice, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}}} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	exportDirectlyIn(t, r, "east", "eu", time.Now(), httpPort, "10.245.0.1")
	exportDirectlyIn(t, r, "west", "us", time.Now(), httpPort, "10.246.0.1", "10.246.0.2")

	// want is each source cluster's zone hints ("" for none).
	expect := func(what string, want map[string]string, reason string) {
		t.Helper()
		testkit.Eventually(t, 30*time.Second, what, func(ctx context.Context) error {
			ss, err := importedSlices(ctx, c, "echo")
			if err != nil {
				return err
			}
			got := map[string]string{}
			for _, s := range ss {
				for _, e := range s.Endpoints {
					h := ""
					if e.Hints != nil {
						var zs []string
						for _, z := range e.Hints.ForZones {
							zs = append(zs, z.Name)
						}
						h = strings.Join(zs, ",")
					}
					cluster := s.Labels[mcsv1beta1.LabelSourceCluster]
					if prev, ok := got[cluster]; ok && prev != h {
						return fmt.Errorf("%s's endpoints hinted differently: %q and %q", cluster, prev, h)
					}
					got[cluster] = h
				}
			}
			for cl, h := range want {
				if got[cl] != h {
					return fmt.Errorf("hints by cluster %v, want %v", got, want)
				}
			}
			si := &mcsv1beta1.ServiceImport{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, si); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(si.Status.Conditions, keys.ConditionLocality)
			switch {
			case reason == "" && cond != nil:
				return fmt.Errorf("Locality condition %s: %s, want none", cond.Reason, cond.Message)
			case reason != "" && (cond == nil || cond.Reason != reason):
				return fmt.Errorf("Locality condition %+v, want reason %s", cond, reason)
			}
			return nil
		})
	}
	none := map[string]string{"hub": "", "east": "", "west": ""}
	expect("echo imported without hints", none, "")

	policy := &networkingv1alpha1.BackendTrafficPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "local"},
		Spec: networkingv1alpha1.BackendTrafficPolicySpec{
			TargetRefs: []gwv1.LocalPolicyTargetReference{{Group: mcsv1beta1.GroupName, Kind: "ServiceImport", Name: "echo"}},
			Locality:   networkingv1alpha1.LocalityLocalFirst,
			Failover: &networkingv1alpha1.Failover{MinReadyEndpoints: 2,
				Order: []networkingv1alpha1.FailoverTarget{{Region: "us"}}},
		},
	}
	if err := c.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	away := keys.ZoneHintElsewhere
	expect("hub's endpoints hinted for hub's zones", map[string]string{"hub": "eu-a,eu-b", "east": away, "west": away}, keys.ReasonLocalCluster)
	derived := func() *corev1.Service {
		t.Helper()
		si := &mcsv1beta1.ServiceImport{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, si); err != nil {
			t.Fatal(err)
		}
		svc := &corev1.Service{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: si.Annotations[keys.AnnotationDerivedService]}, svc); err != nil {
			t.Fatal(err)
		}
		return svc
	}
	derivedDistribution := func() string { return ptr.Deref(derived().Spec.TrafficDistribution, "") }
	if got := derivedDistribution(); got != corev1.ServiceTrafficDistributionPreferClose {
		t.Errorf("the derived Service's trafficDistribution is %q under the policy, want PreferClose", got)
	}
	// For data planes that read the annotation instead (Cilium).
	testkit.Until(t, 10*time.Second, "the derived Service's topology-mode Auto under the policy", func() bool {
		return derived().Annotations[corev1.AnnotationTopologyMode] == "Auto"
	})
	underPolicy := derived().ResourceVersion
	expectEvent(t, c, "echo", keys.ReasonLocalCluster, "zone hints written for traffic that stays in this cluster (at least 2 ready endpoints)")

	setReady := func(ready ...bool) {
		t.Helper()
		s := &discoveryv1.EndpointSlice{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(slice), s); err != nil {
			t.Fatal(err)
		}
		for i := range s.Endpoints {
			s.Endpoints[i].Conditions.Ready = ptr.To(ready[i])
		}
		if err := c.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	setReady(true, false)
	expect("one ready endpoint left in hub: the region takes the traffic", map[string]string{"hub": "eu-a,eu-b", "east": "eu-a,eu-b", "west": away}, keys.ReasonFailedOver)
	expectEvent(t, c, "echo", keys.ReasonFailedOver, "zone hints written for traffic that fails over to region eu (clusters east, hub); this cluster (hub): fewer than 2 ready endpoints")
	setReady(false, false)
	expect("none in hub: us as well, every cluster", none, keys.ReasonFailedOver)
	setReady(true, true)
	expect("hub ready again: the traffic returns", map[string]string{"hub": "eu-a,eu-b", "east": away, "west": away}, keys.ReasonLocalCluster)

	createZonedNode(t, c, "node-eu-c", "eu-c")
	expect("a new zone is hinted", map[string]string{"hub": "eu-a,eu-b,eu-c", "east": away, "west": away}, keys.ReasonLocalCluster)

	// Every decision above rewrote slices, never the derived Service,
	// whose spec and annotations stayed what the policy asks.
	if rv := derived().ResourceVersion; rv != underPolicy {
		t.Errorf("the derived Service was written while the policy held (resourceVersion %s, then %s)", underPolicy, rv)
	}

	if err := c.Delete(ctx, policy); err != nil {
		t.Fatal(err)
	}
	expect("the policy gone, so are the hints", none, "")
	testkit.Until(t, 10*time.Second, "the derived Service's trafficDistribution and topology-mode cleared with the policy", func() bool {
		svc := derived()
		_, annotated := svc.Annotations[corev1.AnnotationTopologyMode]
		return ptr.Deref(svc.Spec.TrafficDistribution, "") == "" && !annotated
	})

	// Someone else's topology-mode on the derived Service is theirs: the
	// agent, reconciling the import again (hub's endpoints change), leaves
	// it and does not write the Service.
	svc := derived()
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	svc.Annotations[corev1.AnnotationTopologyMode] = "Disabled"
	if err := c.Update(ctx, svc, client.FieldOwner("operator")); err != nil {
		t.Fatal(err)
	}
	theirs := svc.ResourceVersion
	setReady(true, false)
	testkit.Eventually(t, 30*time.Second, "hub's endpoint not ready in the imported slices", func(ctx context.Context) error {
		ss, err := importedSlices(ctx, c, "echo")
		if err != nil {
			return err
		}
		for _, s := range ss {
			for _, e := range s.Endpoints {
				if s.Labels[mcsv1beta1.LabelSourceCluster] == "hub" && !ptr.Deref(e.Conditions.Ready, true) {
					return nil
				}
			}
		}
		return fmt.Errorf("no endpoint of hub not ready yet")
	})
	if svc := derived(); svc.Annotations[corev1.AnnotationTopologyMode] != "Disabled" || svc.ResourceVersion != theirs {
		t.Errorf("the agent rewrote the derived Service after another manager set topology-mode (annotation %q, resourceVersion %s, then %s)",
			svc.Annotations[corev1.AnnotationTopologyMode], theirs, svc.ResourceVersion)
	}
}

func createZonedNode(t *testing.T, c client.Client, name, zone string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
	if err := c.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), n) })
}

// expectEvent waits for an event of the given reason on the ServiceImport
// name whose note holds note.
func expectEvent(t *testing.T, c client.Client, name, reason, note string) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, "a "+reason+" event on ServiceImport "+name, func(ctx context.Context) error {
		list := &eventsv1.EventList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "ServiceImport" && e.Regarding.Name == name {
				seen = append(seen, e.Reason+": "+e.Note)
				if e.Reason == reason && strings.Contains(e.Note, note) {
					return nil
				}
			}
		}
		slices.Sort(seen)
		return fmt.Errorf("events: %q", seen)
	})
}
