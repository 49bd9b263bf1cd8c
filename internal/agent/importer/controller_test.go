package importer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/test/fleet"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// reconcileFixture runs the Reconciler by hand against a real API server,
// with a Stream whose desired state and sync the test sets: no registry, no
// manager, no cache (every read is the API server's).
type reconcileFixture struct {
	t      *testing.T
	c      client.Client
	stream *Stream
	rec    *events.FakeRecorder
	r      *Reconciler
	key    types.NamespacedName
}

func newReconcileFixture(t *testing.T, c client.Client, namespace string) *reconcileFixture {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	stream := &Stream{Log: log, imports: map[types.NamespacedName]*Desired{}}
	rec := events.NewFakeRecorder(100)
	return &reconcileFixture{t: t, c: c, stream: stream, rec: rec, key: types.NamespacedName{Namespace: namespace, Name: "echo"},
		r: &Reconciler{Client: c, Stream: stream, Families: []corev1.IPFamily{corev1.IPv4Protocol}, EndpointsPerSlice: 100,
			Recorder: rec, Log: log, Pending: NewPendingTracker(nil)}}
}

// set makes d the registry's desired state of the fixture's import, and
// the stream synced or not.
func (f *reconcileFixture) set(d *Desired, synced bool) {
	f.stream.mu.Lock()
	defer f.stream.mu.Unlock()
	f.stream.imports[f.key] = d
	f.stream.synced = synced
}

func (f *reconcileFixture) reconcile() (reconcile.Result, error) {
	return f.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: f.key})
}

// mustReconcile reconciles and fails the test on an error.
func (f *reconcileFixture) mustReconcile() reconcile.Result {
	f.t.Helper()
	res, err := f.reconcile()
	if err != nil {
		f.t.Fatalf("reconcile: %v", err)
	}
	return res
}

// events drains the events recorded so far.
func (f *reconcileFixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (f *reconcileFixture) serviceImport() *mcsv1beta1.ServiceImport {
	f.t.Helper()
	si := &mcsv1beta1.ServiceImport{}
	if err := f.c.Get(context.Background(), f.key, si); err != nil {
		f.t.Fatal(err)
	}
	return si
}

// derived returns the derived Service, nil when there is none.
func (f *reconcileFixture) derived() *corev1.Service {
	f.t.Helper()
	svc := &corev1.Service{}
	err := f.c.Get(context.Background(), types.NamespacedName{Namespace: f.key.Namespace, Name: DerivedName(f.key.Namespace, f.key.Name)}, svc)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		f.t.Fatal(err)
	}
	return svc
}

// sliceClusters returns the source clusters of the import's slices, one
// entry per slice, sorted.
func (f *reconcileFixture) sliceClusters() []string {
	f.t.Helper()
	var out []string
	for _, s := range f.slices() {
		out = append(out, s.Labels[mcsv1beta1.LabelSourceCluster])
	}
	slices.Sort(out)
	return out
}

// ready returns the ServiceImport's Ready condition; the test fails
// without one.
func (f *reconcileFixture) ready() metav1.Condition {
	f.t.Helper()
	si := f.serviceImport()
	c := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
	if c == nil {
		f.t.Fatalf("ServiceImport has no Ready condition: %+v", si.Status)
	}
	return *c
}

var httpPorts = []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}

// importOf is the desired state of namespace/echo, exported by clusters,
// each with one endpoint of addressType.
func importOf(namespace, typ string, families []string, ports []*registryv1.ServicePort, addressType string, clusters ...string) *Desired {
	d := &Desired{
		Import: &registryv1.Import{Key: &registryv1.ImportKey{Namespace: namespace, Name: "echo"}, Type: typ, Ports: ports, IpFamilies: families},
		Chunks: map[string]map[string]*registryv1.EndpointChunk{},
	}
	for i, c := range clusters {
		d.Import.Clusters = append(d.Import.Clusters, &registryv1.ImportCluster{ClusterId: c, Weight: 1})
		addr := fmt.Sprintf("10.244.%d.1", i)
		if addressType == "IPv6" {
			addr = fmt.Sprintf("fd00:10:244:%x::1", i)
		}
		d.Chunks[c] = map[string]*registryv1.EndpointChunk{"c0": {
			Key:         &registryv1.ChunkKey{Namespace: namespace, Name: "echo", ClusterId: c, Chunk: "c0"},
			AddressType: addressType,
			Ports:       []*registryv1.EndpointPort{{Name: ports[0].GetName(), Protocol: "TCP", Port: 8080}},
			Endpoints:   []*registryv1.Endpoint{{Addresses: []string{addr}, Conditions: &registryv1.EndpointConditions{Ready: true, Serving: true}}},
		}}
	}
	return d
}

// TestImportEdgeCases runs the import reconciler against a real API
// server through the cases of issue 28, item 7: an import that becomes
// unservable here, a ServiceImport spec the API server refuses, and a
// ClusterSetIP import that becomes headless.
func TestImportEdgeCases(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "west"}}})
	c := f.Cluster(t, "west").Client(t)

	unservable := []struct {
		name, namespace string
		// next is the import once it cannot be served in an IPv4 cluster
		// (south has left it).
		next            *Desired
		reason, message string
	}{
		{"no shared IP family", "families",
			importOf("families", "ClusterSetIP", []string{"IPv6"}, httpPorts, "IPv6", "east"),
			string(mcsv1beta1.ServiceImportReasonIPFamilyNotSupported), "ipFamilies [IPv6]"},
		{"mixed port names", "ports",
			importOf("ports", "ClusterSetIP", []string{"IPv4"}, []*registryv1.ServicePort{{Protocol: "TCP", Port: 80}, {Name: "admin", Protocol: "TCP", Port: 81}}, "IPv4", "east"),
			keys.ReasonInvalidPorts, "ports: port 80/TCP has no name"},
	}
	for _, tt := range unservable {
		t.Run("unservable: "+tt.name, func(t *testing.T) {
			fx := newReconcileFixture(t, c, tt.namespace)
			fx.set(importOf(tt.namespace, "ClusterSetIP", []string{"IPv4"}, httpPorts, "IPv4", "east", "south"), true)
			fx.mustReconcile()
			if got := fx.sliceClusters(); !slices.Equal(got, []string{"east", "south"}) {
				t.Fatalf("slices of clusters %v, want east and south", got)
			}
			if fx.derived() == nil || len(fx.serviceImport().Spec.IPs) != 1 {
				t.Fatalf("no derived Service or ServiceImport ips %v", fx.serviceImport().Spec.IPs)
			}
			fx.events()

			// Not synced: what the stream holds may be a state the
			// registry has left, so nothing is deleted yet; the
			// reconcile comes back.
			fx.set(tt.next, false)
			res := fx.mustReconcile()
			if got := fx.sliceClusters(); !slices.Equal(got, []string{"east", "south"}) {
				t.Errorf("unsynced: slices of clusters %v, want east's and south's kept", got)
			}
			if fx.derived() == nil || len(fx.serviceImport().Spec.IPs) != 1 {
				t.Errorf("unsynced: derived Service or ServiceImport ips %v removed", fx.serviceImport().Spec.IPs)
			}
			if res.RequeueAfter <= 0 {
				t.Errorf("unsynced: result %+v, want a requeue", res)
			}

			// Synced: the data plane stops and the ServiceImport says why.
			fx.set(tt.next, true)
			if res := fx.mustReconcile(); res.RequeueAfter != 0 {
				t.Errorf("synced: result %+v, want no requeue (nothing to retry until the import changes)", res)
			}
			if got := fx.sliceClusters(); len(got) != 0 {
				t.Errorf("slices of clusters %v left, want none", got)
			}
			if svc := fx.derived(); svc != nil {
				t.Errorf("derived Service %s left", svc.Name)
			}
			si := fx.serviceImport()
			if len(si.Spec.IPs) != 0 {
				t.Errorf("ServiceImport ips %v, want none", si.Spec.IPs)
			}
			if si.Status.EndpointSliceObjects != mcsv1beta1.EndpointSliceObjectsAbsent {
				t.Errorf("status.endpointSliceObjects %q, want Absent", si.Status.EndpointSliceObjects)
			}
			if cond := fx.ready(); cond.Status != metav1.ConditionFalse || cond.Reason != tt.reason || !strings.Contains(cond.Message, tt.message) {
				t.Errorf("Ready = %s/%s %q, want False/%s naming %q", cond.Status, cond.Reason, cond.Message, tt.reason, tt.message)
			}
			if evs := fx.events(); !slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, "Warning "+tt.reason+" ") }) {
				t.Errorf("events %q, want a Warning %s", evs, tt.reason)
			}

			// Again: converged, nothing written.
			rv := fx.serviceImport().ResourceVersion
			fx.mustReconcile()
			if got := fx.serviceImport().ResourceVersion; got != rv {
				t.Errorf("a converged unservable import was written again (resourceVersion %s, was %s)", got, rv)
			}

			// Servable again: a derived Service and east's slices return.
			fx.set(importOf(tt.namespace, "ClusterSetIP", []string{"IPv4"}, httpPorts, "IPv4", "east"), true)
			fx.mustReconcile()
			if got := fx.sliceClusters(); !slices.Equal(got, []string{"east"}) {
				t.Errorf("servable again: slices of clusters %v, want east", got)
			}
			if svc := fx.derived(); svc == nil || !slices.Equal(fx.serviceImport().Spec.IPs, svc.Spec.ClusterIPs) {
				t.Errorf("servable again: derived Service %v, ServiceImport ips %v", svc, fx.serviceImport().Spec.IPs)
			}
			if cond := fx.ready(); cond.Status != metav1.ConditionTrue {
				t.Errorf("servable again: Ready = %+v", cond)
			}
		})
	}

	t.Run("failed spec apply", func(t *testing.T) {
		fx := newReconcileFixture(t, c, "refused")
		// The CRD allows ClusterSetIP and Headless only: the API server
		// refuses the apply. The ServiceImport does not exist yet, so only
		// an event can tell.
		fx.set(importOf("refused", "Bogus", []string{"IPv4"}, httpPorts, "IPv4", "east"), true)
		_, err := fx.reconcile()
		if !apierrors.IsInvalid(err) {
			t.Fatalf("reconcile error %v, want the API server's Invalid, wrapped", err)
		}
		if evs := fx.events(); !slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, "Warning "+keys.ReasonApplyFailed+" ") }) {
			t.Errorf("events %q, want a Warning %s", evs, keys.ReasonApplyFailed)
		}

		// Once it exists, a refused spec is a condition too.
		fx.set(importOf("refused", "ClusterSetIP", []string{"IPv4"}, httpPorts, "IPv4", "east"), true)
		fx.mustReconcile()
		fx.set(importOf("refused", "Bogus", []string{"IPv4"}, httpPorts, "IPv4", "east"), true)
		_, err = fx.reconcile()
		var status apierrors.APIStatus
		if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
			t.Fatalf("reconcile error %v, want the API server's Invalid, wrapped", err)
		}
		if cond := fx.ready(); cond.Status != metav1.ConditionFalse || cond.Reason != keys.ReasonApplyFailed || !strings.Contains(cond.Message, "ServiceImport spec") || !strings.Contains(cond.Message, "Bogus") {
			t.Errorf("Ready = %s/%s %q, want False/%s naming the ServiceImport spec and the refused value", cond.Status, cond.Reason, cond.Message, keys.ReasonApplyFailed)
		}
		if evs := fx.events(); !slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, "Warning "+keys.ReasonApplyFailed+" ") }) {
			t.Errorf("events %q, want a Warning %s", evs, keys.ReasonApplyFailed)
		}
		// The data plane applied before stays: the import did not change
		// in a way this cluster could act on.
		if got := fx.sliceClusters(); !slices.Equal(got, []string{"east"}) {
			t.Errorf("slices of clusters %v, want east's kept", got)
		}
	})

	t.Run("headless has no ips", func(t *testing.T) {
		fx := newReconcileFixture(t, c, "headless")
		fx.set(importOf("headless", "ClusterSetIP", []string{"IPv4"}, httpPorts, "IPv4", "east"), true)
		fx.mustReconcile()
		if ips := fx.serviceImport().Spec.IPs; len(ips) != 1 {
			t.Fatalf("ClusterSetIP import has ips %v, want one", ips)
		}
		fx.set(importOf("headless", "Headless", []string{"IPv4"}, httpPorts, "IPv4", "east"), true)
		fx.mustReconcile()
		si := fx.serviceImport()
		if si.Spec.Type != mcsv1beta1.Headless || len(si.Spec.IPs) != 0 {
			t.Errorf("ServiceImport type %s, ips %v; want Headless without ips", si.Spec.Type, si.Spec.IPs)
		}
		if svc := fx.derived(); svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("derived Service %+v, want a headless one", svc)
		}
		if cond := fx.ready(); cond.Status != metav1.ConditionTrue {
			t.Errorf("Ready = %+v", cond)
		}
	})
}

func TestUnservable(t *testing.T) {
	v4only := []corev1.IPFamily{corev1.IPv4Protocol}
	tests := []struct {
		name            string
		imp             *registryv1.Import
		reason, message string
	}{
		{"servable", &registryv1.Import{IpFamilies: []string{"IPv4"}, Ports: httpPorts}, "", ""},
		{"one shared family of two", &registryv1.Import{IpFamilies: []string{"IPv6", "IPv4"}, Ports: httpPorts}, "", ""},
		{"no families given: the cluster's primary", &registryv1.Import{Ports: httpPorts}, "", ""},
		{"no shared family", &registryv1.Import{IpFamilies: []string{"IPv6"}, Ports: httpPorts},
			string(mcsv1beta1.ServiceImportReasonIPFamilyNotSupported), "ipFamilies [IPv6]: none is in this cluster's Service network [IPv4]"},
		{"an unnamed port beside a named one", &registryv1.Import{IpFamilies: []string{"IPv4"}, Ports: []*registryv1.ServicePort{{Protocol: "TCP", Port: 80}, {Name: "admin", Protocol: "TCP", Port: 81}}},
			keys.ReasonInvalidPorts, "ports: port 80/TCP has no name"},
		{"both: the ports are named first", &registryv1.Import{IpFamilies: []string{"IPv6"}, Ports: []*registryv1.ServicePort{{Protocol: "TCP", Port: 80}, {Name: "admin", Protocol: "TCP", Port: 81}}},
			keys.ReasonInvalidPorts, "ports: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, err := unservable(tt.imp, v4only)
			if reason != tt.reason || (err == nil) != (tt.message == "") || err != nil && !strings.HasPrefix(err.Error(), tt.message) {
				t.Errorf("unservable = %q, %v; want %q, %q…", reason, err, tt.reason, tt.message)
			}
		})
	}
}

func TestImportIPs(t *testing.T) {
	held := []string{"10.96.0.10"}
	derived := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIPs: []string{"10.96.0.20"}}}
	tests := []struct {
		name      string
		typ       string
		svc       *corev1.Service
		withdrawn bool
		want      []string
	}{
		{"ClusterSetIP takes its derived Service's", string(mcsv1beta1.ClusterSetIP), derived, false, derived.Spec.ClusterIPs},
		{"ClusterSetIP whose derived Service failed keeps its ips", string(mcsv1beta1.ClusterSetIP), nil, false, held},
		{"headless has none", string(mcsv1beta1.Headless), derived, false, nil},
		{"withdrawn has none", string(mcsv1beta1.ClusterSetIP), nil, true, nil},
		{"headless and withdrawn", string(mcsv1beta1.Headless), nil, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := importIPs(tt.typ, held, tt.svc, tt.withdrawn); !slices.Equal(got, tt.want) {
				t.Errorf("importIPs = %v, want %v", got, tt.want)
			}
		})
	}
}
