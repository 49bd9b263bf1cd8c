package importer

import (
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLastWriteIsOurs(t *testing.T) {
	t0 := metav1.NewTime(time.Unix(1000, 0))
	t1 := metav1.NewTime(time.Unix(1001, 0))
	entry := func(manager string, at metav1.Time) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Time: &at}
	}
	tests := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		{"only ours", []metav1.ManagedFieldsEntry{entry(keys.FieldManagerAgent, t0)}, true},
		{"ours after theirs", []metav1.ManagedFieldsEntry{entry("kubectl", t0), entry(keys.FieldManagerAgent, t1)}, true},
		{"theirs after ours", []metav1.ManagedFieldsEntry{entry(keys.FieldManagerAgent, t0), entry("kubectl", t1)}, false},
		{"same second: not sure, so not ours", []metav1.ManagedFieldsEntry{entry(keys.FieldManagerAgent, t1), entry("kubectl", t1)}, false},
		{"status manager counts as ours", []metav1.ManagedFieldsEntry{entry("kubectl", t0), entry(keys.FieldManagerAgentStatus, t1)}, true},
		{"no entries", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{ManagedFields: tt.entries}}
			if got := lastWriteIsOurs(s); got != tt.want {
				t.Errorf("lastWriteIsOurs = %v, want %v", got, tt.want)
			}
		})
	}
}
