package export

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func se(annotations map[string]string) *mcsv1beta1.ServiceExport {
	return &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{
		Namespace: "demo", Name: "echo", Annotations: annotations,
		CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
	}}
}

func TestBuildExport(t *testing.T) {
	base := &corev1.Service{Spec: corev1.ServiceSpec{
		ClusterIP:             "10.96.0.10",
		IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
		Ports:                 []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, AppProtocol: ptr.To("http")}},
		SessionAffinity:       corev1.ServiceAffinityClientIP,
		SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](600)}},
		InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyLocal),
		TrafficDistribution:   ptr.To("PreferClose"),
	}}
	tests := []struct {
		name       string
		se         *mcsv1beta1.ServiceExport
		svc        func() *corev1.Service
		wantReason string
	}{
		{"missing Service", se(nil), func() *corev1.Service { return nil }, string(mcsv1beta1.ServiceExportReasonNoService)},
		{"ExternalName", se(nil), func() *corev1.Service {
			s := base.DeepCopy()
			s.Spec.Type = corev1.ServiceTypeExternalName
			return s
		}, string(mcsv1beta1.ServiceExportReasonInvalidServiceType)},
		{"weight not a number", se(map[string]string{keys.AnnotationWeight: "heavy"}), func() *corev1.Service { return base }, keys.ReasonInvalidWeight},
		{"weight too high", se(map[string]string{keys.AnnotationWeight: "1001"}), func() *corev1.Service { return base }, keys.ReasonInvalidWeight},
		{"weight negative", se(map[string]string{keys.AnnotationWeight: "-1"}), func() *corev1.Service { return base }, keys.ReasonInvalidWeight},
		{"headless", se(nil), func() *corev1.Service {
			s := base.DeepCopy()
			s.Spec.ClusterIP = corev1.ClusterIPNone
			return s
		}, ""},
		{"cluster IP", se(map[string]string{keys.AnnotationWeight: "0"}), func() *corev1.Service { return base }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, invalid := BuildExport("east", tt.se, tt.svc(), "")
			if tt.wantReason != "" {
				if invalid == nil || invalid.Reason != tt.wantReason {
					t.Fatalf("invalid = %v, want reason %s", invalid, tt.wantReason)
				}
				return
			}
			if invalid != nil {
				t.Fatalf("unexpected invalid: %v", invalid)
			}
			if tt.name == "headless" && e.GetType() != "Headless" {
				t.Errorf("type = %s, want Headless", e.GetType())
			}
			if tt.name == "cluster IP" {
				if e.GetType() != "ClusterSetIP" || e.GetWeight() != 0 || e.GetSessionAffinityTimeoutSeconds() != 600 ||
					e.GetInternalTrafficPolicy() != "Local" || e.GetTrafficDistribution() != "PreferClose" ||
					len(e.GetIpFamilies()) != 2 || e.GetPorts()[0].GetAppProtocol() != "http" ||
					!e.GetExportedSince().AsTime().Equal(tt.se.CreationTimestamp.Time) {
					t.Errorf("export = %v", e)
				}
			}
		})
	}
	if e, _ := BuildExport("east", se(nil), base, ""); e.GetWeight() != 1 {
		t.Errorf("default weight = %d, want 1", e.GetWeight())
	}
}

func TestBuildChunks(t *testing.T) {
	slices := []discoveryv1.EndpointSlice{
		{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "demo", Name: "echo-b"},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}, {Name: ptr.To("all")}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.244.0.1"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "demo", Name: "echo-7c9d-x2k4p"}},
				{Addresses: []string{"10.244.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}, Zone: ptr.To("a")},
				{Addresses: []string{"10.244.0.3"}, TargetRef: &corev1.ObjectReference{Kind: "Node", Name: "node-1"}},
				{Addresses: []string{"10.244.0.4"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "other", Name: "echo-0"}},
			},
		},
		{ObjectMeta: metav1.ObjectMeta{Name: "echo-a"}, AddressType: discoveryv1.AddressTypeIPv6},
		{ObjectMeta: metav1.ObjectMeta{Name: "imported", Labels: map[string]string{discoveryv1.LabelManagedBy: keys.EndpointSliceManagedBy}}},
	}
	chunks := BuildChunks("east", se(nil), slices)
	if len(chunks) != 2 || chunks[0].GetKey().GetChunk() != "echo-a" || chunks[1].GetKey().GetChunk() != "echo-b" {
		t.Fatalf("chunks = %v, want echo-a and echo-b (sorted, imported slices skipped)", chunks)
	}
	b := chunks[1]
	if len(b.GetPorts()) != 1 || b.GetPorts()[0].GetProtocol() != "TCP" {
		t.Errorf("ports = %v, want http/TCP only (a port without a number is skipped, protocol defaults to TCP)", b.GetPorts())
	}
	nilConds := b.GetEndpoints()[0].GetConditions()
	if !nilConds.GetReady() || !nilConds.GetServing() || nilConds.GetTerminating() {
		t.Errorf("nil conditions = %v, want ready and serving", nilConds)
	}
	set := b.GetEndpoints()[1].GetConditions()
	if set.GetReady() || !set.GetServing() || !set.GetTerminating() || b.GetEndpoints()[1].GetZone() != "a" {
		t.Errorf("explicit conditions = %v", b.GetEndpoints()[1])
	}
	// The Pod's name travels with its endpoint; other references do not.
	for i, want := range []string{"echo-7c9d-x2k4p", "", "", ""} {
		if got := b.GetEndpoints()[i].GetPodName(); got != want {
			t.Errorf("endpoint %v: pod name %q, want %q", b.GetEndpoints()[i].GetAddresses(), got, want)
		}
	}
}

func TestCheckExportedMetadata(t *testing.T) {
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		wantReason  string
		wantMessage string
	}{
		{name: "none"},
		{name: "plain keys", labels: map[string]string{"tier": "web", "app.kubernetes.io/name": "echo"}, annotations: map[string]string{"example.com/owner": "team a"}},
		{name: "reserved label", labels: map[string]string{"fleetnet.dev/export": "true"}, wantReason: keys.ReasonReservedExportKey,
			wantMessage: `spec.exportedLabels[fleetnet.dev/export]: Invalid value: "fleetnet.dev/export": the prefix fleetnet.dev/ is reserved for fleetnet and Kubernetes`},
		{name: "the agent's managed-by label", labels: map[string]string{keys.LabelManagedBy: "me"}, wantReason: keys.ReasonReservedExportKey,
			wantMessage: `spec.exportedLabels[app.kubernetes.io/managed-by]`},
		{name: "reserved annotation", annotations: map[string]string{"kubernetes.io/description": "x"}, wantReason: keys.ReasonReservedExportKey,
			wantMessage: `spec.exportedAnnotations[kubernetes.io/description]: Invalid value: "kubernetes.io/description": the prefix kubernetes.io/ is reserved`},
		{name: "bad label value", labels: map[string]string{"tier": "web tier"}, wantReason: keys.ReasonInvalidExportedMetadata,
			wantMessage: `spec.exportedLabels: Invalid value: "web tier"`},
		{name: "bad annotation key", annotations: map[string]string{"a b": "x"}, wantReason: keys.ReasonInvalidExportedMetadata,
			wantMessage: `spec.exportedAnnotations: Invalid value: "a b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := se(nil)
			s.Spec.ExportedLabels, s.Spec.ExportedAnnotations = tt.labels, tt.annotations
			invalid := CheckExportedMetadata(s)
			if tt.wantReason == "" {
				if invalid != nil {
					t.Fatalf("refused: %v", invalid)
				}
				return
			}
			if invalid == nil || invalid.Reason != tt.wantReason || !strings.Contains(invalid.Message, tt.wantMessage) {
				t.Fatalf("invalid = %+v, want reason %s and message containing %q", invalid, tt.wantReason, tt.wantMessage)
			}
		})
	}
}

// TestExportScopeAnnotations: fleetnet.dev/export-to and
// fleetnet.dev/export-to-selector become the export's scope (the selector
// in its canonical form), or make it invalid with a reason of their own
// and a message naming the annotation and the value.
func TestExportScopeAnnotations(t *testing.T) {
	svc := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	selector := keys.AnnotationExportToSelector
	for _, tt := range []struct {
		name         string
		annotations  map[string]string
		wantTo       string
		wantSelector string
		wantReason   string
		wantMessage  string
	}{
		{name: "unscoped"},
		{name: "names", annotations: map[string]string{keys.AnnotationExportTo: "west, east2"}, wantTo: "east2,west"},
		{name: "selector", annotations: map[string]string{selector: "env=prod"}, wantSelector: "env=prod"},
		{name: "selector, canonical", annotations: map[string]string{selector: " tier in (b,a), env = prod "}, wantSelector: "env=prod,tier in (a,b)"},
		{name: "names and selector", annotations: map[string]string{keys.AnnotationExportTo: "west", selector: "env=prod"}, wantTo: "west", wantSelector: "env=prod"},
		{name: "selector not parsed", annotations: map[string]string{selector: "env=prod,tier in (a"},
			wantReason: keys.ReasonInvalidExportSelector, wantMessage: `metadata.annotations[fleetnet.dev/export-to-selector]: Invalid value: "env=prod,tier in (a": not a label selector`},
		{name: "selector value not a label value", annotations: map[string]string{selector: "env=prod west"},
			wantReason: keys.ReasonInvalidExportSelector, wantMessage: `metadata.annotations[fleetnet.dev/export-to-selector]: Invalid value: "env=prod west"`},
		{name: "selector with <", annotations: map[string]string{selector: "replicas<3"},
			wantReason: keys.ReasonInvalidExportSelector, wantMessage: `"<" (in "replicas<3") is not supported in label selectors`},
		{name: "empty selector", annotations: map[string]string{selector: ""},
			wantReason: keys.ReasonInvalidExportSelector, wantMessage: `metadata.annotations[fleetnet.dev/export-to-selector]: Invalid value: "": selects every cluster`},
		{name: "bad names beside a good selector", annotations: map[string]string{keys.AnnotationExportTo: "West", selector: "env=prod"},
			wantReason: keys.ReasonInvalidExportScope, wantMessage: `metadata.annotations[fleetnet.dev/export-to][0]: Invalid value: "West"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, invalid := BuildExport("east", se(tt.annotations), svc, "")
			if tt.wantReason != "" {
				if invalid == nil || invalid.Reason != tt.wantReason || !strings.Contains(invalid.Message, tt.wantMessage) {
					t.Fatalf("invalid = %+v, want reason %s and a message containing %s", invalid, tt.wantReason, tt.wantMessage)
				}
				return
			}
			if invalid != nil {
				t.Fatalf("unexpected invalid: %v", invalid)
			}
			if got := strings.Join(e.GetExportTo(), ","); got != tt.wantTo {
				t.Errorf("export_to = %q, want %q", got, tt.wantTo)
			}
			if got := e.GetExportToSelector(); got != tt.wantSelector {
				t.Errorf("export_to_selector = %q, want %q", got, tt.wantSelector)
			}
		})
	}
}

func TestReadyMessage(t *testing.T) {
	st := &registryv1.ExportStatus{ImportedBy: []string{"b", "c"}}
	for _, tt := range []struct {
		to       []string
		selector string
		st       *registryv1.ExportStatus
		want     string
	}{
		{nil, "", st, "exported to the clusterset"},
		{[]string{"b"}, "", st, "exported to b only (fleetnet.dev/export-to); imported by: b, c"},
		{nil, "env=prod", st, "exported to the clusters matching env=prod only (fleetnet.dev/export-to-selector); imported by: b, c"},
		{[]string{"b"}, "env=prod", nil, "exported to b and the clusters matching env=prod only (fleetnet.dev/export-to, fleetnet.dev/export-to-selector); imported by: none registered yet"},
	} {
		if got := readyMessage(&registryv1.Export{ExportTo: tt.to, ExportToSelector: tt.selector}, tt.st); got != tt.want {
			t.Errorf("readyMessage(%v, %q) = %q, want %q", tt.to, tt.selector, got, tt.want)
		}
	}
}
