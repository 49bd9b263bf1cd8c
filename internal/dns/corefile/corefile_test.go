package corefile

import (
	"slices"
	"strings"
	"testing"
)

// kubeadm's Corefile, as a cluster's kube-system/coredns ConfigMap holds it.
const kubeadm = `.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30
    loop
    reload
    loadbalance
}
`

func TestWireAndUnwire(t *testing.T) {
	addrs := []string{"10.96.0.53"}
	wired, err := Wire(kubeadm, "clusterset.local", addrs, 5)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(wired, kubeadm) || !Wired(wired) {
		t.Fatalf("wired Corefile does not keep the original and add the block:\n%s", wired)
	}
	zones, err := ServerZones(wired)
	if err != nil {
		t.Fatalf("the wired Corefile does not parse: %v\n%s", err, wired)
	}
	if !slices.Equal(zones, []string{"", "clusterset.local"}) {
		t.Errorf("zones = %q, want the root and clusterset.local", zones)
	}
	if !strings.Contains(wired, "forward . 10.96.0.53\n") || !strings.Contains(wired, "    cache 5\n") {
		t.Errorf("no forward to fleetnet-dns:\n%s", wired)
	}
	again, err := Wire(wired, "clusterset.local", addrs, 5)
	if err != nil || again != wired {
		t.Errorf("wiring again changed the Corefile (%v):\n%s", err, again)
	}
	moved, err := Wire(wired, "clusterset.local", []string{"10.96.0.54", "10.96.0.55:1053"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(moved, beginMarker) != 1 || !strings.Contains(moved, "forward . 10.96.0.54 10.96.0.55:1053\n") || strings.Contains(moved[strings.Index(moved, beginMarker):], "cache") {
		t.Errorf("a new address does not replace the block:\n%s", moved)
	}
	back, err := Unwire(moved)
	if err != nil || back != kubeadm {
		t.Errorf("unwired Corefile differs from the original (%v):\n%s", err, back)
	}
	if same, err := Unwire(kubeadm); err != nil || same != kubeadm {
		t.Errorf("unwiring a Corefile without the block changed it (%v)", err)
	}
	if ok, err := HasPlugin(wired, "reload"); err != nil || !ok {
		t.Errorf("HasPlugin(reload) = %v, %v; want true", ok, err)
	}
}

func TestWireRefuses(t *testing.T) {
	tests := []struct {
		name     string
		corefile string
		addrs    []string
		want     string
	}{
		{"a hand-written forward", kubeadm + "clusterset.local:53 {\n    forward . 10.0.0.1\n}\n", []string{"10.96.0.53"}, "already has a server block for clusterset.local"},
		{"a hand-written forward, other spelling", kubeadm + "dns://ClusterSet.Local. {\n    forward . 10.0.0.1\n}\n", []string{"10.96.0.53"}, "already has a server block for clusterset.local"},
		{"no address", kubeadm, nil, "no address of fleetnet-dns"},
		{"a name for an address", kubeadm, []string{"fleetnet-dns.fleetnet-system"}, `address "fleetnet-dns.fleetnet-system" of fleetnet-dns: not an IP`},
		{"a Corefile that does not parse", ".:53 {\n    errors\n", []string{"10.96.0.53"}, "parsing the Corefile"},
		{"half a block", kubeadm + beginMarker + "\nclusterset.local:53 {\n}\n", []string{"10.96.0.53"}, "only one of fleetnet-dns's markers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Wire(tt.corefile, "clusterset.local", tt.addrs, 5)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Wire error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
