package importer

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestWrittenImports(t *testing.T) {
	key := types.NamespacedName{Namespace: "demo", Name: "echo"}
	at := func(rv string) *mcsv1beta1.ServiceImport {
		return &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "echo", ResourceVersion: rv}}
	}
	t0 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	// The reconciler read version 10, wrote the spec (11), the ClusterSetIP
	// (12) and the status (13).
	writes := func(w *writtenImports) {
		w.record(at("10"), at("11"), t0)
		w.record(at("11"), at("12"), t0)
		w.record(at("12"), at("13"), t0)
	}
	tests := []struct {
		name   string
		cached *mcsv1beta1.ServiceImport
		after  time.Duration
		want   bool
		// then: whether a second look is still behind
		then bool
	}{
		{"not in the cache", nil, time.Millisecond, true, true},
		{"the version read before writing", at("10"), time.Millisecond, true, true},
		{"an earlier write", at("12"), time.Millisecond, true, true},
		{"caught up", at("13"), time.Millisecond, false, false},
		{"someone else's write", at("14"), time.Millisecond, false, false},
		{"still behind after the TTL", at("11"), writtenTTL + time.Millisecond, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w writtenImports
			writes(&w)
			if got := w.behind(key, tt.cached, t0.Add(tt.after)); got != tt.want {
				t.Errorf("behind = %v, want %v", got, tt.want)
			}
			if got := w.behind(key, tt.cached, t0.Add(tt.after)); got != tt.then {
				t.Errorf("behind again = %v, want %v", got, tt.then)
			}
		})
	}

	var w writtenImports
	if w.behind(key, nil, t0) {
		t.Error("behind without a write")
	}
	// A write that changed nothing returns the version it was based on.
	w.record(at("13"), at("13"), t0)
	if w.behind(key, at("13"), t0) {
		t.Error("a no-op write is behind itself")
	}
	writes(&w)
	w.forget(key)
	if w.behind(key, nil, t0) {
		t.Error("behind after forget")
	}
}
