package model

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
)

var (
	earlier = metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	later   = metav1.NewTime(earlier.Add(time.Hour))
)

func hostListener(name string, port int32, hostname string) gwv1.Listener {
	l := gwv1.Listener{Name: gwv1.SectionName(name), Port: gwv1.PortNumber(port), Protocol: gwv1.HTTPProtocolType}
	if hostname != "" {
		h := gwv1.Hostname(hostname)
		l.Hostname = &h
	}
	return l
}

func httpsListener(name string, port int32, hostname, secret string) gwv1.Listener {
	l := hostListener(name, port, hostname)
	l.Protocol = gwv1.HTTPSProtocolType
	l.TLS = &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: gwv1.ObjectName(secret)}}}
	return l
}

func gatewayOf(ns, name, class string, created metav1.Time, listeners ...gwv1.Listener) gwv1.Gateway {
	return gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1, CreationTimestamp: created},
		Spec:       gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(class), Listeners: listeners},
	}
}

func classOf(name string) gwv1.GatewayClass {
	return gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: gwv1.GatewayClassSpec{ControllerName: keys.GatewayControllerName}}
}

func gatewaysInput(gws ...gwv1.Gateway) Input {
	return Input{
		ControllerName:      keys.GatewayControllerName,
		CRDBundleVersions:   []string{SupportedBundleVersion},
		LoadBalancerClasses: []string{"edge"},
		GatewayClasses:      []gwv1.GatewayClass{classOf("fleetnet"), classOf("afd")},
		Gateways:            gws,
	}
}

// tlsSecret is a kubernetes.io/tls Secret with a fresh self-signed key pair.
func tlsSecret(t *testing.T, ns, name string) corev1.Secret {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "shop.example"}, DNSNames: []string{"shop.example"},
		NotBefore: earlier.Time, NotAfter: earlier.AddDate(1, 0, 0)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS, Data: map[string][]byte{
		corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}}
}

func gatewayStatusOf(t *testing.T, res Result, ns, name string) GatewayStatus {
	t.Helper()
	for _, st := range res.Status.Gateways {
		if st.Namespace == ns && st.Name == name {
			return st
		}
	}
	t.Fatalf("no status for Gateway %s/%s", ns, name)
	return GatewayStatus{}
}

func listenerCond(st GatewayStatus, listener, typ string) *metav1.Condition {
	for _, l := range st.Listeners {
		if string(l.Name) == listener {
			return meta.FindStatusCondition(l.Conditions, typ)
		}
	}
	return nil
}

// served lists the listeners of a Gateway's model entry, as name@port.
func served(m edgev1.Model, ns, name string) []string {
	g, ok := findGateway(m, ns, name)
	if !ok {
		return nil
	}
	out := []string{}
	for _, l := range g.Listeners {
		out = append(out, l.Name)
	}
	return out
}

// Gateways that share the edge's sockets (no address pool): a port's
// protocol and each hostname on it go to the oldest Gateway, whatever the
// names; the newer Gateway's listener says who holds it and is not
// served, the rest of it is.
func TestSharedPortConflictsGoToTheOldestGateway(t *testing.T) {
	type want struct {
		winner, loser string // namespace/name
		reason        gwv1.ListenerConditionReason
	}
	tests := []struct {
		name string
		in   func(t *testing.T) Input
		// want: the loser's listener "shop" is Conflicted; none when zero.
		want want
	}{
		{"an older Gateway keeps its hostname from a newer one whose namespace sorts first", func(*testing.T) Input {
			return gatewaysInput(
				gatewayOf("demo", "web", "fleetnet", earlier, hostListener("shop", 8080, "shop.example")),
				gatewayOf("aaa", "takeover", "fleetnet", later, hostListener("shop", 8080, "shop.example"), hostListener("other", 8080, "other.example")),
			)
		}, want{"demo/web", "aaa/takeover", gwv1.ListenerReasonHostnameConflict}},
		{"the older wins when it sorts last too", func(*testing.T) Input {
			return gatewaysInput(
				gatewayOf("zzz", "web", "fleetnet", earlier, hostListener("shop", 8080, "shop.example")),
				gatewayOf("demo", "takeover", "fleetnet", later, hostListener("shop", 8080, "shop.example"), hostListener("other", 8080, "other.example")),
			)
		}, want{"zzz/web", "demo/takeover", gwv1.ListenerReasonHostnameConflict}},
		{"created in the same second: namespace/name decides", func(*testing.T) Input {
			return gatewaysInput(
				gatewayOf("demo", "takeover", "fleetnet", earlier, hostListener("shop", 8080, "shop.example"), hostListener("other", 8080, "other.example")),
				gatewayOf("aaa", "web", "fleetnet", earlier, hostListener("shop", 8080, "shop.example")),
			)
		}, want{"aaa/web", "demo/takeover", gwv1.ListenerReasonHostnameConflict}},
		{"two listeners for any hostname", func(*testing.T) Input {
			return gatewaysInput(
				gatewayOf("demo", "web", "fleetnet", earlier, hostListener("shop", 8080, "")),
				gatewayOf("aaa", "takeover", "fleetnet", later, hostListener("shop", 8080, ""), hostListener("other", 8081, "")),
			)
		}, want{"demo/web", "aaa/takeover", gwv1.ListenerReasonHostnameConflict}},
		{"HTTPS on an older Gateway's HTTP port", func(t *testing.T) Input {
			in := gatewaysInput(
				gatewayOf("demo", "web", "fleetnet", earlier, hostListener("shop", 8080, "shop.example")),
				gatewayOf("aaa", "takeover", "fleetnet", later, httpsListener("shop", 8080, "secure.example", "cert"), hostListener("other", 8081, "")),
			)
			in.Secrets = []corev1.Secret{tlsSecret(t, "aaa", "cert")}
			return in
		}, want{"demo/web", "aaa/takeover", gwv1.ListenerReasonProtocolConflict}},
		{"different hostnames on one port: no conflict", func(*testing.T) Input {
			return gatewaysInput(
				gatewayOf("demo", "web", "fleetnet", earlier, hostListener("shop", 8080, "shop.example")),
				gatewayOf("aaa", "takeover", "fleetnet", later, hostListener("shop", 8080, "blog.example")),
			)
		}, want{}},
		{"Gateways with addresses of their own share no socket", func(*testing.T) Input {
			in := gatewaysInput(
				gatewayOf("demo", "web", "fleetnet", earlier, hostListener("shop", 8080, "shop.example")),
				gatewayOf("aaa", "takeover", "fleetnet", later, hostListener("shop", 8080, "shop.example")),
			)
			in.AddressPool = netip.MustParsePrefix("127.0.1.0/24")
			return in
		}, want{}},
		{"a Gateway a cloud provider serves shares no socket of the edge", func(*testing.T) Input {
			in := gatewaysInput(
				gatewayOf("demo", "web", "afd", earlier, hostListener("shop", 8080, "shop.example")),
				gatewayOf("aaa", "takeover", "fleetnet", later, hostListener("shop", 8080, "shop.example")),
			)
			in.CloudClass = func(class string) bool { return class == "afd" }
			return in
		}, want{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Build(tt.in(t))
			if tt.want.loser == "" {
				for _, st := range res.Status.Gateways {
					if c := listenerCond(st, "shop", string(gwv1.ListenerConditionConflicted)); c == nil || c.Status != metav1.ConditionFalse {
						t.Errorf("%s/%s listener shop: Conflicted %+v, want False", st.Namespace, st.Name, c)
					}
					if got := served(res.Model, st.Namespace, st.Name); len(got) != 1 {
						t.Errorf("%s/%s serves %v, want its listener", st.Namespace, st.Name, got)
					}
				}
				return
			}
			wns, wname, _ := strings.Cut(tt.want.winner, "/")
			lns, lname, _ := strings.Cut(tt.want.loser, "/")
			winner, loser := gatewayStatusOf(t, res, wns, wname), gatewayStatusOf(t, res, lns, lname)

			if c := listenerCond(winner, "shop", string(gwv1.ListenerConditionConflicted)); c == nil || c.Status != metav1.ConditionFalse {
				t.Errorf("the winner's listener: Conflicted %+v, want False", c)
			}
			if got := served(res.Model, wns, wname); len(got) != 1 || got[0] != "shop" {
				t.Errorf("the winner serves %v, want [shop]", got)
			}

			c := listenerCond(loser, "shop", string(gwv1.ListenerConditionConflicted))
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(tt.want.reason) || c.ObservedGeneration != 1 {
				t.Fatalf("the loser's listener: Conflicted %+v, want True %s", c, tt.want.reason)
			}
			if !strings.Contains(c.Message, "Gateway "+tt.want.winner) || !strings.Contains(c.Message, "created first") {
				t.Errorf("the loser's message %q does not name the winner %s and why", c.Message, tt.want.winner)
			}
			if got := served(res.Model, lns, lname); len(got) != 1 || got[0] != "other" {
				t.Errorf("the loser serves %v, want only its other listener", got)
			}
			acc := meta.FindStatusCondition(loser.Conditions, string(gwv1.GatewayConditionAccepted))
			if acc == nil || acc.Status != metav1.ConditionTrue || acc.Reason != string(gwv1.GatewayReasonListenersNotValid) || !strings.Contains(acc.Message, "shop") {
				t.Errorf("the loser: Accepted %+v, want True ListenersNotValid naming shop", acc)
			}
		})
	}
}

// A Gateway whose edit is refused keeps its last accepted entry, and so
// its hostnames: a newer Gateway cannot take them meanwhile. A newer
// Gateway's refused entry gives way to an older live one.
func TestRefusedGatewayKeepsItsHostnames(t *testing.T) {
	web := gatewayOf("demo", "web", "fleetnet", earlier, hostListener("shop", 8080, "shop.example"))
	takeover := gatewayOf("aaa", "takeover", "fleetnet", later, hostListener("shop", 8080, "shop.example"))
	previous := Build(gatewaysInput(web)).Model

	refused := web.DeepCopy()
	refused.Generation = 2
	refused.Spec.Addresses = []gwv1.GatewaySpecAddress{{Value: "192.0.2.1"}}
	in := gatewaysInput(*refused, takeover)
	in.Previous = &previous
	res := Build(in)
	if got := served(res.Model, "demo", "web"); len(got) != 1 {
		t.Errorf("the refused older Gateway serves %v, want its last accepted listener", got)
	}
	c := listenerCond(gatewayStatusOf(t, res, "aaa", "takeover"), "shop", string(gwv1.ListenerConditionConflicted))
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "demo/web") {
		t.Errorf("the newer Gateway: Conflicted %+v, want True naming demo/web", c)
	}

	// The other way round: the newer Gateway's kept entry loses.
	previous = Build(gatewaysInput(takeover)).Model
	refusedNew := takeover.DeepCopy()
	refusedNew.Generation = 2
	refusedNew.Spec.Addresses = []gwv1.GatewaySpecAddress{{Value: "192.0.2.1"}}
	in = gatewaysInput(web, *refusedNew)
	in.Previous = &previous
	res = Build(in)
	if got := served(res.Model, "demo", "web"); len(got) != 1 {
		t.Errorf("the older Gateway serves %v, want its listener", got)
	}
	if got := served(res.Model, "aaa", "takeover"); len(got) != 0 {
		t.Errorf("the newer refused Gateway still serves %v on the older one's hostname", got)
	}
}

// Ports the edges hold for themselves are refused before any edge sees
// them: a Gateway listener there is not accepted (PortUnavailable), the
// rest of its Gateway is served; an edge load balancer there is not
// accepted (PortConflict). Cloud providers' objects may use them.
func TestReservedPortsAreRefused(t *testing.T) {
	in := gatewaysInput(
		gatewayOf("demo", "web", "fleetnet", earlier, hostListener("shop", 8080, ""), hostListener("metrics", 9090, "")),
		gatewayOf("demo", "cloud", "afd", earlier, hostListener("health", 9091, "cloud.example")),
	)
	in.CloudClass = func(class string) bool { return class == "afd" }
	in.ReservedPorts = map[int32]string{9090: "the edges' metrics port", 9091: "the edges' health port", 9092: "another"}
	in.LoadBalancerClasses = []string{"edge", "azure-cross-region"}
	for _, lb := range []struct {
		name, class string
		port        int32
	}{{"db", "edge", 9090}, {"cloud-db", "azure-cross-region", 9092}} {
		in.MultiClusterLoadBalancers = append(in.MultiClusterLoadBalancers, networkingv1alpha1.MultiClusterLoadBalancer{
			ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: lb.name, Generation: 1, CreationTimestamp: earlier},
			Spec: networkingv1alpha1.MultiClusterLoadBalancerSpec{ServiceImportName: "db", Class: networkingv1alpha1.LoadBalancerClass(lb.class),
				Ports: []networkingv1alpha1.LoadBalancerPort{{Port: lb.port, Protocol: networkingv1alpha1.ProtocolTCP}}},
		})
	}
	res := Build(in)

	st := gatewayStatusOf(t, res, "demo", "web")
	c := listenerCond(st, "metrics", string(gwv1.ListenerConditionAccepted))
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.ListenerReasonPortUnavailable) || !strings.Contains(c.Message, "port 9090 is reserved on the edges: the edges' metrics port") {
		t.Errorf("listener on 9090: Accepted %+v, want False PortUnavailable naming the reservation", c)
	}
	if got := served(res.Model, "demo", "web"); len(got) != 1 || got[0] != "shop" {
		t.Errorf("demo/web serves %v, want [shop]", got)
	}
	if got := served(res.Model, "demo", "cloud"); len(got) != 1 {
		t.Errorf("the cloud's Gateway serves %v, want its listener on 9091", got)
	}
	for _, lst := range res.Status.LoadBalancers {
		acc := meta.FindStatusCondition(lst.Conditions, networkingv1alpha1.LoadBalancerConditionAccepted)
		switch lst.Name {
		case "db":
			if acc == nil || acc.Status != metav1.ConditionFalse || acc.Reason != networkingv1alpha1.LoadBalancerReasonPortConflict || !strings.Contains(acc.Message, "9090/TCP is reserved on the edges") {
				t.Errorf("edge load balancer on 9090: Accepted %+v, want False PortConflict", acc)
			}
		case "cloud-db":
			if acc == nil || acc.Status != metav1.ConditionTrue {
				t.Errorf("cloud load balancer on 9092: Accepted %+v, want True", acc)
			}
		}
	}
}
