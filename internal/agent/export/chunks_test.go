package export

import (
	"testing"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/agent/publish"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestChunkCacheReusesChunksOfUnchangedSlices(t *testing.T) {
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	slice := func(name, uid, rv, addr string, labels map[string]string) discoveryv1.EndpointSlice {
		return discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), ResourceVersion: rv, Labels: labels},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}}},
		}
	}
	imported := map[string]string{discoveryv1.LabelManagedBy: keys.EndpointSliceManagedBy}
	var c chunkCache
	first := c.build("east", se, []discoveryv1.EndpointSlice{
		slice("web-a", "1", "10", "10.0.0.1", nil), slice("web-b", "2", "11", "10.0.0.2", nil), slice("imported", "3", "12", "10.9.9.9", imported),
	})
	if len(first) != 2 || first[0].GetKey().GetChunk() != "web-a" || first[1].GetKey().GetChunk() != "web-b" {
		t.Fatalf("chunks %v, want web-a and web-b (the imported slice is not this cluster's)", first)
	}
	tests := []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		same   map[string]bool // chunk -> the same object as the first build's
	}{
		{"nothing changed", []discoveryv1.EndpointSlice{slice("web-a", "1", "10", "10.0.0.1", nil), slice("web-b", "2", "11", "10.0.0.2", nil)},
			map[string]bool{"web-a": true, "web-b": true}},
		{"one slice changed", []discoveryv1.EndpointSlice{slice("web-a", "1", "10", "10.0.0.1", nil), slice("web-b", "2", "13", "10.0.0.3", nil)},
			map[string]bool{"web-a": true, "web-b": false}},
		{"a slice re-created under its name", []discoveryv1.EndpointSlice{slice("web-a", "4", "10", "10.0.0.1", nil)},
			map[string]bool{"web-a": false}},
	}
	prev := map[string]any{}
	for _, ch := range first {
		prev[ch.GetKey().GetChunk()] = ch
	}
	for _, tt := range tests {
		got := c.build("east", se, tt.slices)
		if len(got) != len(tt.same) {
			t.Fatalf("%s: %d chunks, want %d", tt.name, len(got), len(tt.same))
		}
		for _, ch := range got {
			name := ch.GetKey().GetChunk()
			if same := prev[name] == any(ch); same != tt.same[name] {
				t.Errorf("%s: chunk %s reused = %v, want %v", tt.name, name, same, tt.same[name])
			}
			if want := tt.slices[0]; name == want.Name && ch.GetEndpoints()[0].GetAddresses()[0] != want.Endpoints[0].Addresses[0] {
				t.Errorf("%s: chunk %s holds %v", tt.name, name, ch.GetEndpoints()[0].GetAddresses())
			}
			prev[name] = ch
		}
	}
	if c.forget(publishKey(se)); len(c.byExport) != 0 {
		t.Errorf("forget left %v", c.byExport)
	}
}

func publishKey(se *mcsv1beta1.ServiceExport) publish.ExportKey {
	return publish.ExportKey{Namespace: se.Namespace, Name: se.Name}
}
