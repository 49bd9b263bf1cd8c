// Package ports allocates the east-west gateway's ports: one per imported
// service port that crosses networks, from a range the operator gives.
// The allocation lives in the API objects (each derived Service records
// its port), so it is read back, not remembered: Allocate keeps every
// port already held and gives new keys the lowest free ones.
package ports

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Key is an imported service port.
type Key struct {
	Namespace, Name string
	Port            int32
}

func (k Key) String() string { return k.Namespace + "/" + k.Name + ":" + strconv.Itoa(int(k.Port)) }

// Range is the gateway's ports, First to Last inclusive.
type Range struct{ First, Last int32 }

// ParseRange reads "first-last", 1 ≤ first ≤ last ≤ 65535.
func ParseRange(s string) (Range, error) {
	a, b, ok := strings.Cut(s, "-")
	first, err1 := strconv.Atoi(strings.TrimSpace(a))
	last, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || first < 1 || last > 65535 || first > last {
		return Range{}, fmt.Errorf("port range %q: want first-last, 1 to 65535, first not above last (e.g. 15000-15999)", s)
	}
	return Range{First: int32(first), Last: int32(last)}, nil
}

// Size is how many ports the range holds.
func (r Range) Size() int { return int(r.Last-r.First) + 1 }

func (r Range) contains(p int32) bool { return p >= r.First && p <= r.Last }

// Allocate gives each key of want a port of r. held are the ports the API
// objects record now, by key, wanted or not: a key keeps its port, and a
// port held by a key no longer wanted stays taken (its Service is still
// there, connections may still use it) until it is gone from held. A
// held port outside r, or held by two keys (an edit by hand), is given
// anew to the key that loses it (the later in key order). Keys that find
// no free port are in exhausted, with an error naming the range.
func Allocate(r Range, held map[Key]int32, want []Key) (ports map[Key]int32, exhausted map[Key]error) {
	ports = make(map[Key]int32, len(want))
	taken := map[int32]Key{}
	heldKeys := make([]Key, 0, len(held))
	for k := range held {
		heldKeys = append(heldKeys, k)
	}
	slices.SortFunc(heldKeys, compare)
	for _, k := range heldKeys {
		p := held[k]
		if _, dup := taken[p]; dup || !r.contains(p) {
			continue
		}
		taken[p] = k
	}
	wanted := slices.Clone(want)
	slices.SortFunc(wanted, compare)
	wanted = slices.Compact(wanted)
	var fresh []Key
	for _, k := range wanted {
		if p, ok := held[k]; ok && taken[p] == k {
			ports[k] = p
			continue
		}
		fresh = append(fresh, k)
	}
	next := r.First
	for _, k := range fresh {
		for next <= r.Last {
			if _, used := taken[next]; !used {
				break
			}
			next++
		}
		if next > r.Last {
			if exhausted == nil {
				exhausted = map[Key]error{}
			}
			exhausted[k] = fmt.Errorf("the east-west gateway's ports %d-%d are all taken (%d imported service ports cross networks): widen the range to carry %s", r.First, r.Last, len(taken), k)
			continue
		}
		taken[next] = k
		ports[k] = next
	}
	return ports, exhausted
}

func compare(a, b Key) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Port, b.Port))
}
