package validate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestCluster(t *testing.T) {
	tests := []struct {
		name    string
		cluster *registryv1.Cluster
		// wantErr is a substring of the error; empty means valid.
		wantErr string
	}{
		{"valid", &registryv1.Cluster{Id: "east", ClustersetId: "fleet", Region: "us-west-2"}, ""},
		{"no region", &registryv1.Cluster{Id: "east", ClustersetId: "fleet"}, ""},
		{"region with spaces", &registryv1.Cluster{Id: "east", ClustersetId: "fleet", Region: "US West (Oregon)"}, `cluster.region: Invalid value: "US West (Oregon)"`},
		{"id not a label", &registryv1.Cluster{Id: "East_1", ClustersetId: "fleet"}, `cluster.id: Invalid value: "East_1"`},
		{"missing id", &registryv1.Cluster{ClustersetId: "fleet"}, "cluster.id: Required value"},
		{"missing clusterset", &registryv1.Cluster{Id: "east"}, "cluster.clustersetId: Required value"},
		{"properties", withProperties("env", "prod", "topology.example.com/tier", "gold", "empty", ""), ""},
		{"the well-known properties, its own", withProperties("cluster.clusterset.k8s.io", "east", "clusterset.k8s.io", "fleet"), ""},
		{"property name not a label key", withProperties("bad name", "x"), `cluster.properties[bad name]: Invalid value: "bad name": the name must be a label key`},
		{"property value not a label value", withProperties("env", "prod west"), `cluster.properties[env]: Invalid value: "prod west": the value must be a label value`},
		{"property value too long", withProperties("env", strings.Repeat("a", 64)), `cluster.properties[env]: Invalid value: "aaaa`},
		{"another cluster's id", withProperties("cluster.clusterset.k8s.io", "west"), `cluster.properties[cluster.clusterset.k8s.io]: Invalid value: "west": must be the cluster's own "east"`},
		{"another clusterset", withProperties("clusterset.k8s.io", "other"), `cluster.properties[clusterset.k8s.io]: Invalid value: "other": must be the cluster's own "fleet"`},
		{"too many properties", withProperties(manyProperties(MaxClusterProperties + 1)...), "cluster.properties: Too many: 65: must have at most 64 items"},
		{"properties too large", withProperties(largeProperties()...), "cluster.properties: Too long"},
		{"east-west gateway by address", &registryv1.Cluster{Id: "east", ClustersetId: "fleet", EastwestGateway: "192.0.2.10:15008"}, ""},
		{"east-west gateway by name", &registryv1.Cluster{Id: "east", ClustersetId: "fleet", EastwestGateway: "ew.east.example.com:15008"}, ""},
		{"east-west gateway IPv6", &registryv1.Cluster{Id: "east", ClustersetId: "fleet", EastwestGateway: "[2001:db8::1]:15008"}, ""},
		{"east-west gateway without port", &registryv1.Cluster{Id: "east", ClustersetId: "fleet", EastwestGateway: "192.0.2.10"}, `cluster.eastwestGateway: Invalid value: "192.0.2.10": want host:port`},
		{"east-west gateway port 0", &registryv1.Cluster{Id: "east", ClustersetId: "fleet", EastwestGateway: "192.0.2.10:0"}, `port "0": want 1 to 65535`},
		{"east-west gateway host not a name", &registryv1.Cluster{Id: "east", ClustersetId: "fleet", EastwestGateway: "bad_host:15008"}, `host "bad_host": want an IP address or a DNS name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, Cluster(tt.cluster, field.NewPath("cluster")), tt.wantErr)
		})
	}
}

func withProperties(kv ...string) *registryv1.Cluster {
	c := &registryv1.Cluster{Id: "east", ClustersetId: "fleet", Properties: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Properties[kv[i]] = kv[i+1]
	}
	return c
}

func manyProperties(n int) []string {
	var kv []string
	for i := range n {
		kv = append(kv, fmt.Sprintf("p%d", i), "v")
	}
	return kv
}

// largeProperties are valid but long: 60 of about 320 bytes.
func largeProperties() []string {
	long := strings.Repeat("n", 60)
	prefix := strings.Join([]string{long, long, long, long}, ".")
	var kv []string
	for i := range 60 {
		kv = append(kv, fmt.Sprintf("%s/p%02d", prefix, i), strings.Repeat("v", 63))
	}
	return kv
}

func validExport() *registryv1.Export {
	return &registryv1.Export{
		Key:           &registryv1.ExportKey{Namespace: "demo", Name: "echo", ClusterId: "east"},
		ExportedSince: timestamppb.New(time.Unix(1, 0)),
		Type:          "ClusterSetIP",
		Ports:         []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}},
		IpFamilies:    []string{"IPv4"},
		Weight:        1,
	}
}

func TestExport(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(*registryv1.Export)
		wantErr string
	}{
		{"valid", func(*registryv1.Export) {}, ""},
		{"port zero", func(e *registryv1.Export) { e.Ports[0].Port = 0 }, "export.ports[0].port: Invalid value: 0"},
		{"port too high", func(e *registryv1.Export) { e.Ports[0].Port = 65536 }, "export.ports[0].port: Invalid value: 65536"},
		{"bad protocol", func(e *registryv1.Export) { e.Ports[0].Protocol = "HTTP" }, `export.ports[0].protocol: Unsupported value: "HTTP"`},
		{"duplicate port", func(e *registryv1.Export) {
			e.Ports = append(e.Ports, &registryv1.ServicePort{Name: "other", Protocol: "TCP", Port: 80})
		}, `export.ports[1]: Duplicate value: "80/TCP"`},
		{"same port on UDP is fine", func(e *registryv1.Export) {
			e.Ports = append(e.Ports, &registryv1.ServicePort{Name: "udp", Protocol: "UDP", Port: 80})
		}, ""},
		{"unnamed beside named", func(e *registryv1.Export) {
			e.Ports = append(e.Ports, &registryv1.ServicePort{Protocol: "TCP", Port: 81})
		}, "every port needs a name"},
		{"bad port name", func(e *registryv1.Export) { e.Ports[0].Name = "HTTP_1" }, `export.ports[0].name: Invalid value: "HTTP_1"`},
		{"digits-only port name, as kubectl create service names ports", func(e *registryv1.Export) { e.Ports[0].Name = "80-8080" }, ""},
		{"bad type", func(e *registryv1.Export) { e.Type = "LoadBalancer" }, `export.type: Unsupported value: "LoadBalancer"`},
		{"headless without ports", func(e *registryv1.Export) { e.Type, e.Ports = "Headless", nil }, ""},
		{"clusterset IP without ports", func(e *registryv1.Export) { e.Ports = nil }, "export.ports: Required value"},
		{"bad namespace", func(e *registryv1.Export) { e.Key.Namespace = "Demo" }, `export.key.namespace: Invalid value: "Demo"`},
		{"bad name", func(e *registryv1.Export) { e.Key.Name = "1echo" }, `export.key.name: Invalid value: "1echo"`},
		{"bad family", func(e *registryv1.Export) { e.IpFamilies = []string{"IPv5"} }, `export.ipFamilies[0]: Unsupported value: "IPv5"`},
		{"weight too high", func(e *registryv1.Export) { e.Weight = 1001 }, "export.weight: Invalid value: 1001"},
		{"regional frontend", func(e *registryv1.Export) {
			e.RegionalFrontend = "/subscriptions/s/resourceGroups/mc/providers/Microsoft.Network/loadBalancers/kubernetes/frontendIPConfigurations/a1"
		}, ""},
		{"relative regional frontend", func(e *registryv1.Export) { e.RegionalFrontend = "loadBalancers/kubernetes" }, `export.regionalFrontend: Invalid value: "loadBalancers/kubernetes": must be a resource id starting with /`},
		{"regional frontend with a space", func(e *registryv1.Export) { e.RegionalFrontend = "/a b" }, "must not contain spaces"},
		{"private link service", func(e *registryv1.Export) {
			e.PrivateLinkService, e.PrivateLinkAutoApproval = "/subscriptions/s/resourceGroups/mc/providers/Microsoft.Network/privateLinkServices/pls-a1", true
		}, ""},
		{"relative private link service", func(e *registryv1.Export) { e.PrivateLinkService = "pls-a1" }, `export.privateLinkService: Invalid value: "pls-a1": must be a resource id starting with /`},
		{"auto approval without a private link service", func(e *registryv1.Export) { e.PrivateLinkAutoApproval = true }, "export.privateLinkAutoApproval: Invalid value: true: needs privateLinkService"},
		{"bad label", func(e *registryv1.Export) { e.Labels = map[string]string{"a": "b c"} }, `export.labels: Invalid value: "b c"`},
		{"reserved label", func(e *registryv1.Export) { e.Labels = map[string]string{"fleetnet.dev/export": "true"} }, `export.labels[fleetnet.dev/export]: Invalid value: "fleetnet.dev/export": the prefix fleetnet.dev/ is reserved`},
		{"the agent's own label", func(e *registryv1.Export) { e.Labels = map[string]string{"app.kubernetes.io/managed-by": "me"} }, `export.labels[app.kubernetes.io/managed-by]`},
		{"reserved annotation", func(e *registryv1.Export) { e.Annotations = map[string]string{"multicluster.kubernetes.io/x": "y"} }, `export.annotations[multicluster.kubernetes.io/x]: Invalid value`},
		{"fleetnet subdomain", func(e *registryv1.Export) { e.Annotations = map[string]string{"agent.fleetnet.dev/x": "y"} }, `the prefix agent.fleetnet.dev/ is reserved`},
		{"common app label", func(e *registryv1.Export) { e.Labels = map[string]string{"app.kubernetes.io/name": "echo"} }, ""},
		{"affinity timeout", func(e *registryv1.Export) { e.SessionAffinityTimeoutSeconds = 90000 }, "export.sessionAffinityTimeoutSeconds: Invalid value: 90000"},
		{"selector", func(e *registryv1.Export) { e.ExportToSelector = "env=prod,tier in (a,b)" }, ""},
		{"selector and names", func(e *registryv1.Export) { e.ExportToSelector, e.ExportTo = "env=prod", []string{"west"} }, ""},
		{"bad selector", func(e *registryv1.Export) { e.ExportToSelector = "env=prod west" }, `export.exportToSelector: Invalid value: "env=prod west": not a label selector`},
		{"selector with >", func(e *registryv1.Export) { e.ExportToSelector = "weight>3" }, `export.exportToSelector: Invalid value: "weight>3": not a label selector: ">" (in "weight>3") is not supported`},
		{"selector of every cluster", func(e *registryv1.Export) { e.ExportToSelector = " " }, `export.exportToSelector: Invalid value: " ": selects every cluster`},
		{"selector too long", func(e *registryv1.Export) { e.ExportToSelector = "env in (" + strings.Repeat("a,", 3000) + "b)" }, "export.exportToSelector: Too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := validExport()
			tt.mod(e)
			checkErr(t, Export(e, field.NewPath("export")), tt.wantErr)
		})
	}
}

func TestParseExportToSelector(t *testing.T) {
	path := field.NewPath("metadata", "annotations").Key("fleetnet.dev/export-to-selector")
	for _, tt := range []struct {
		value, want, wantErr string
	}{
		{"env=prod", "env=prod", ""},
		{" tier in (b, a) , env == prod ", "env==prod,tier in (a,b)", ""},
		{"env!=dev,!legacy,region", "env!=dev,!legacy,region", ""},
		{"example.com/env notin (dev)", "example.com/env notin (dev)", ""},
		{"", "", `metadata.annotations[fleetnet.dev/export-to-selector]: Invalid value: "": selects every cluster`},
		{"env=pr od", "", `metadata.annotations[fleetnet.dev/export-to-selector]: Invalid value: "env=pr od": not a label selector`},
		{"env in (prod", "", `Invalid value: "env in (prod": not a label selector`},
		{"Bad Key=x", "", `Invalid value: "Bad Key=x": not a label selector`},
		{"replicas<3", "", `"<" (in "replicas<3") is not supported in label selectors`},
	} {
		t.Run(tt.value, func(t *testing.T) {
			got, errs := ParseExportToSelector(tt.value, path)
			checkErr(t, errs, tt.wantErr)
			if got != tt.want {
				t.Errorf("ParseExportToSelector(%q) = %q, want %q", tt.value, got, tt.want)
			}
		})
	}
}

func validChunk() *registryv1.EndpointChunk {
	return &registryv1.EndpointChunk{
		Key:         &registryv1.ChunkKey{Namespace: "demo", Name: "echo", ClusterId: "east", Chunk: "echo-abcde"},
		AddressType: "IPv4",
		Ports:       []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}},
		Endpoints:   []*registryv1.Endpoint{{Addresses: []string{"10.244.1.5"}, Zone: "a"}},
	}
}

func TestChunk(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(*registryv1.EndpointChunk)
		wantErr string
	}{
		{"valid", func(*registryv1.EndpointChunk) {}, ""},
		{"loopback", func(c *registryv1.EndpointChunk) { c.Endpoints[0].Addresses[0] = "127.0.0.1" }, `chunk.endpoints[0].addresses[0]: Invalid value: "127.0.0.1"`},
		{"wrong family", func(c *registryv1.EndpointChunk) { c.Endpoints[0].Addresses[0] = "fd00::1" }, "must be an IPv4 address"},
		{"not an address", func(c *registryv1.EndpointChunk) { c.Endpoints[0].Addresses[0] = "ten" }, `Invalid value: "ten"`},
		{"no addresses", func(c *registryv1.EndpointChunk) { c.Endpoints[0].Addresses = nil }, "chunk.endpoints[0].addresses"},
		{"bad address type", func(c *registryv1.EndpointChunk) { c.AddressType = "IPX" }, `chunk.addressType: Unsupported value: "IPX"`},
		{"fqdn", func(c *registryv1.EndpointChunk) {
			c.AddressType = "FQDN"
			c.Endpoints[0].Addresses[0] = "db.example.com"
		}, ""},
		{"bad zone", func(c *registryv1.EndpointChunk) { c.Endpoints[0].Zone = "zone a" }, `chunk.endpoints[0].zone: Invalid value: "zone a"`},
		{"pod name", func(c *registryv1.EndpointChunk) { c.Endpoints[0].PodName = "echo-7c9d-x2k4p" }, ""},
		{"bad pod name", func(c *registryv1.EndpointChunk) { c.Endpoints[0].PodName = "Echo_0" }, `chunk.endpoints[0].podName: Invalid value: "Echo_0"`},
		{"bad chunk name", func(c *registryv1.EndpointChunk) { c.Key.Chunk = "Echo/1" }, `chunk.key.chunk: Invalid value: "Echo/1"`},
		{"too many endpoints", func(c *registryv1.EndpointChunk) {
			for range MaxEndpointsPerChunk {
				c.Endpoints = append(c.Endpoints, c.Endpoints[0])
			}
		}, "chunk.endpoints: Too many"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validChunk()
			tt.mod(c)
			checkErr(t, Chunk(c, field.NewPath("chunk")), tt.wantErr)
		})
	}
}

func checkErr(t *testing.T, errs field.ErrorList, want string) {
	t.Helper()
	got := errs.ToAggregate()
	switch {
	case want == "" && got != nil:
		t.Fatalf("unexpected error: %v", got)
	case want != "" && got == nil:
		t.Fatalf("no error, want one with %q", want)
	case want != "" && !strings.Contains(got.Error(), want):
		t.Fatalf("error %q does not contain %q", got.Error(), want)
	}
}

// FuzzValidate feeds arbitrary wire bytes through validation: it never
// panics, and whatever it accepts survives a round trip unchanged.
func FuzzValidate(f *testing.F) {
	for _, m := range []proto.Message{validExport(), validChunk()} {
		b, _ := proto.Marshal(m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e := &registryv1.Export{}
		if proto.Unmarshal(data, e) == nil && len(Export(e, field.NewPath("export"))) == 0 {
			b, err := proto.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			back := &registryv1.Export{}
			if err := proto.Unmarshal(b, back); err != nil || len(Export(back, field.NewPath("export"))) != 0 {
				t.Fatalf("valid export does not survive a round trip: %v", err)
			}
		}
		c := &registryv1.EndpointChunk{}
		if proto.Unmarshal(data, c) == nil {
			_ = Chunk(c, field.NewPath("chunk"))
		}
		cl := &registryv1.Cluster{}
		if proto.Unmarshal(data, cl) == nil {
			_ = Cluster(cl, field.NewPath("cluster"))
		}
	})
}
