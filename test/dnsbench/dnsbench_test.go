package main

import (
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	h := newHistogram()
	for i := 1; i <= 100; i++ {
		h.add(time.Duration(i) * 10 * time.Microsecond) // 10µs … 1ms
	}
	h.add(time.Second) // beyond the last bucket
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 511 * time.Microsecond}, {0.99, 1001 * time.Microsecond}, {1, maxLatency}} {
		if got := h.percentile(tc.p); got != tc.want {
			t.Errorf("p%v = %s, want %s", tc.p*100, got, tc.want)
		}
	}
	var empty histogram
	if empty.percentile(0.99) != 0 {
		t.Error("an empty histogram has no percentile")
	}
}

// TestCorefiles: both servers get the same plugins; without cache neither
// has one.
func TestCorefiles(t *testing.T) {
	for _, cache := range []bool{true, false} {
		fleet := corefile(config{zone: "clusterset.local", cache: cache}, 1, 2, 3, 4, "/k", 5*time.Second)
		kube := corefile(config{zone: "cluster.local", cache: cache}, 1, 2, 3, 4, "/k", 5*time.Second)
		for _, plugin := range []string{"bind 127.0.0.1", "errors", "health 127.0.0.1:3", "ready 127.0.0.1:4", "prometheus 127.0.0.1:2", "cache 5"} {
			want := cache || plugin != "cache 5"
			if strings.Contains(fleet, plugin) != want || strings.Contains(kube, plugin) != want {
				t.Errorf("cache=%v: %q in fleetnet-dns' %v, in CoreDNS's %v, want %v:\n%s\n%s", cache, plugin,
					strings.Contains(fleet, plugin), strings.Contains(kube, plugin), want, fleet, kube)
			}
		}
		if !strings.Contains(fleet, "fleetnet {") || !strings.Contains(kube, "kubernetes cluster.local {") {
			t.Errorf("answering plugins missing:\n%s\n%s", fleet, kube)
		}
	}
}
