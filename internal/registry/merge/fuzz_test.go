package merge

import (
	"fmt"
	"testing"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"google.golang.org/protobuf/proto"
)

// exportsFrom turns fuzz bytes into a few exports with small, clashing
// values, so that the fuzzer reaches every conflict.
func exportsFrom(data []byte) []*registryv1.Export {
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	names := []string{"", "http", "web", "grpc"}
	types := []string{"ClusterSetIP", "Headless"}
	families := [][]string{{"IPv4"}, {"IPv6"}, {"IPv4", "IPv6"}, {"IPv6", "IPv4"}}
	n := int(next()%4) + 1
	var out []*registryv1.Export
	for i := range n {
		e := export(fmt.Sprintf("c%d", i), int(next()%3), nil, func(e *registryv1.Export) {
			e.Type = types[next()%2]
			e.IpFamilies = families[next()%4]
			if next()%2 == 0 {
				e.SessionAffinity = "ClientIP"
			}
			e.Labels = map[string]string{"k": fmt.Sprint(next() % 2)}
		})
		seen := map[portKey]bool{}
		named := map[string]bool{}
		for range int(next()%3) + 1 {
			p := &registryv1.ServicePort{Name: names[next()%4], Protocol: []string{"TCP", "UDP"}[next()%2], Port: int32(80 + next()%3)}
			// A Service's ports are unique by (port, protocol) and by name;
			// the registry refuses others at the door.
			if !seen[keyOf(p)] && (p.GetName() == "" || !named[p.GetName()]) {
				seen[keyOf(p)] = true
				named[p.GetName()] = true
				e.Ports = append(e.Ports, p)
			}
		}
		out = append(out, e)
	}
	return out
}

func FuzzMergeInvariants(f *testing.F) {
	f.Add([]byte{3, 0, 0, 0, 0, 0, 2, 1, 0, 1, 1, 1, 1, 1, 0, 2, 2, 0})
	f.Add([]byte{1, 2, 1, 3, 1, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		exports := exportsFrom(data)
		clusters := map[string]Cluster{}
		for i, e := range exports {
			clusters[e.GetKey().GetClusterId()] = Cluster{Live: i%3 != 2}
		}
		want := Merge(key, exports, clusters)

		// The result is independent of arrival order.
		for shift := 1; shift < len(exports); shift++ {
			rotated := append(append([]*registryv1.Export{}, exports[shift:]...), exports[:shift]...)
			got := Merge(key, rotated, clusters)
			if !proto.Equal(want.Import, got.Import) {
				t.Fatalf("import depends on order:\n%v\n%v", want.Import, got.Import)
			}
			for id, s := range want.Statuses {
				if !proto.Equal(s, got.Statuses[id]) {
					t.Fatalf("status of %s depends on order:\n%v\n%v", id, s, got.Statuses[id])
				}
			}
		}
		if want.Import == nil {
			return
		}
		// Ports are unique by (port, protocol) and never mix unnamed with
		// named ones.
		seen := map[portKey]bool{}
		names := map[string]bool{}
		unnamed := 0
		for _, p := range want.Import.GetPorts() {
			if seen[keyOf(p)] {
				t.Fatalf("duplicate port %v in %v", p, want.Import.GetPorts())
			}
			seen[keyOf(p)] = true
			if names[p.GetName()] && p.GetName() != "" {
				t.Fatalf("duplicate port name %q in %v", p.GetName(), want.Import.GetPorts())
			}
			names[p.GetName()] = true
			if p.GetName() == "" {
				unnamed++
			}
		}
		if unnamed > 0 && len(want.Import.GetPorts()) > 1 {
			// Only the oldest export itself can carry such a set (validation
			// refuses it at the door); the merge never creates one.
			mixedAtSource := false
			for _, e := range exports {
				u := 0
				for _, p := range e.GetPorts() {
					if p.GetName() == "" {
						u++
					}
				}
				if u > 0 && len(e.GetPorts()) > 1 && samePorts(e.GetPorts(), want.Import.GetPorts()) {
					mixedAtSource = true
				}
			}
			if !mixedAtSource {
				t.Fatalf("merge created a mixed port set %v", want.Import.GetPorts())
			}
		}
		if len(want.Import.GetClusters()) == 0 {
			t.Fatal("import without clusters")
		}
	})
}
