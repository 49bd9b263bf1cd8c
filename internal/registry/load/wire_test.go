package load

import (
	"testing"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"google.golang.org/protobuf/proto"
)

func TestDecodeEvent(t *testing.T) {
	chunk := &registryv1.EndpointChunk{
		Key:         &registryv1.ChunkKey{Namespace: "ns", Name: "svc", ClusterId: "c1", Chunk: "slice-0"},
		AddressType: "IPv4",
		Ports:       []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}},
		Endpoints: []*registryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}, Hostname: "v42", Conditions: &registryv1.EndpointConditions{Ready: true}},
			{Addresses: []string{"10.0.0.2"}, Hostname: "v7"},
			{Addresses: []string{"10.0.0.3"}},
		},
	}
	for _, tc := range []struct {
		name string
		in   *registryv1.WatchEvent
		want event
	}{
		{"reset", &registryv1.WatchEvent{Revision: 5, Event: &registryv1.WatchEvent_Reset_{Reset_: &registryv1.Reset{}}}, event{revision: 5, kind: kindReset}},
		{"synced", &registryv1.WatchEvent{Revision: 1 << 40, Event: &registryv1.WatchEvent_Synced{Synced: &registryv1.Synced{}}}, event{revision: 1 << 40, kind: kindSynced}},
		{"import upsert", &registryv1.WatchEvent{Revision: 9, Event: &registryv1.WatchEvent_ImportUpsert{ImportUpsert: &registryv1.Import{
			Key: &registryv1.ImportKey{Namespace: "ns", Name: "svc"}, Type: "ClusterSetIP", Labels: map[string]string{"a": "b"},
			Clusters: []*registryv1.ImportCluster{{ClusterId: "c1"}}}}}, event{revision: 9, kind: kindImportUpsert, key: "ns/svc"}},
		{"import delete", &registryv1.WatchEvent{Revision: 10, Event: &registryv1.WatchEvent_ImportDelete{ImportDelete: &registryv1.ImportKey{Namespace: "ns", Name: "svc"}}},
			event{revision: 10, kind: kindImportDelete, key: "ns/svc"}},
		{"chunk upsert", &registryv1.WatchEvent{Revision: 11, Event: &registryv1.WatchEvent_EndpointsUpsert{EndpointsUpsert: chunk}},
			event{revision: 11, kind: kindChunkUpsert, key: "ns/svc/c1/slice-0", endpoints: 3, version: 42}},
		{"chunk delete", &registryv1.WatchEvent{Revision: 12, Event: &registryv1.WatchEvent_EndpointsDelete{EndpointsDelete: chunk.GetKey()}},
			event{revision: 12, kind: kindChunkDelete, key: "ns/svc/c1/slice-0"}},
		{"export status is skipped", &registryv1.WatchEvent{Revision: 13, Event: &registryv1.WatchEvent_ExportStatus{ExportStatus: &registryv1.ExportStatus{
			Key: &registryv1.ExportKey{Namespace: "ns", Name: "svc", ClusterId: "c1"}}}}, event{revision: 13, kind: kindOther}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := proto.Marshal(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeEvent(b)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("decoded %+v, want %+v", got, tc.want)
			}
			if _, err := decodeEvent(b[:len(b)-1]); err == nil && len(b) > 2 {
				t.Errorf("a truncated event decoded without error")
			}
		})
	}
}
