package eastwest

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/fleetnet/fleetnet/internal/eastwest/ports"
	"k8s.io/apimachinery/pkg/types"
)

// Allocator hands out the local gateway's ports, one per carried service
// port of each import that goes through it. What derived Services record
// (keys.AnnotationEastWestPorts) is read back once, before the first
// allocation, so that a restarted agent keeps every import's ports; after
// that, the allocator is the one writer (the agent's leader).
type Allocator struct {
	Range ports.Range

	mu     sync.Mutex
	seeded bool
	held   map[types.NamespacedName]map[int32]int32
}

// Assign returns the gateway port of each service port in want for the
// import key, keeping the ports it holds. load, called once, returns what
// the cluster's derived Services record. A port that cannot be had (the
// range is full) is an error naming it; the others are still assigned.
func (a *Allocator) Assign(key types.NamespacedName, want []int32, load func() (map[types.NamespacedName]map[int32]int32, error)) (map[int32]int32, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.seeded {
		recorded, err := load()
		if err != nil {
			return nil, fmt.Errorf("reading the east-west ports derived Services record: %w", err)
		}
		a.held = recorded
		if a.held == nil {
			a.held = map[types.NamespacedName]map[int32]int32{}
		}
		a.seeded = true
	}
	all := map[ports.Key]int32{}
	for k, byPort := range a.held {
		for sp, gp := range byPort {
			all[ports.Key{Namespace: k.Namespace, Name: k.Name, Port: sp}] = gp
		}
	}
	keys := make([]ports.Key, 0, len(want))
	for _, p := range want {
		keys = append(keys, ports.Key{Namespace: key.Namespace, Name: key.Name, Port: p})
	}
	// Ports of this import it no longer wants are free for it again.
	for sp := range a.held[key] {
		if !slices.Contains(want, sp) {
			delete(all, ports.Key{Namespace: key.Namespace, Name: key.Name, Port: sp})
		}
	}
	got, exhausted := ports.Allocate(a.Range, all, keys)
	out := make(map[int32]int32, len(got))
	for k, gp := range got {
		out[k.Port] = gp
	}
	a.held[key] = maps.Clone(out)
	if len(exhausted) > 0 {
		errs := make([]string, 0, len(exhausted))
		for _, k := range slices.SortedFunc(maps.Keys(exhausted), func(x, y ports.Key) int { return int(x.Port - y.Port) }) {
			errs = append(errs, exhausted[k].Error())
		}
		return out, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}

// Release frees the ports of an import that no longer goes through the
// gateway.
func (a *Allocator) Release(key types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.held, key)
}

// FormatPorts is keys.AnnotationEastWestPorts' value: service port =
// gateway port, by service port.
func FormatPorts(byPort map[int32]int32) string {
	parts := make([]string, 0, len(byPort))
	for _, sp := range slices.Sorted(maps.Keys(byPort)) {
		parts = append(parts, fmt.Sprintf("%d=%d", sp, byPort[sp]))
	}
	return strings.Join(parts, ",")
}

// ParsePorts reads keys.AnnotationEastWestPorts; an entry that is not
// "port=port" with ports 1 to 65535 is an error naming it.
func ParsePorts(s string) (map[int32]int32, error) {
	out := map[int32]int32{}
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		a, b, ok := strings.Cut(part, "=")
		sp, err1 := strconv.ParseInt(a, 10, 32)
		gp, err2 := strconv.ParseInt(b, 10, 32)
		if !ok || err1 != nil || err2 != nil || sp < 1 || sp > 65535 || gp < 1 || gp > 65535 {
			return nil, fmt.Errorf("%q: want <service port>=<gateway port>, each 1 to 65535", part)
		}
		out[int32(sp)] = int32(gp)
	}
	return out, nil
}
