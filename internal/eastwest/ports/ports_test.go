package ports_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/internal/eastwest/ports"
)

func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ports.Range
		ok   bool
	}{
		{"15000-15999", ports.Range{First: 15000, Last: 15999}, true},
		{" 1 - 1 ", ports.Range{First: 1, Last: 1}, true},
		{"15999-15000", ports.Range{}, false},
		{"0-10", ports.Range{}, false},
		{"1-65536", ports.Range{}, false},
		{"15000", ports.Range{}, false},
		{"a-b", ports.Range{}, false},
	} {
		got, err := ports.ParseRange(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseRange(%q) = %v, %v", tc.in, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), tc.in) {
			t.Errorf("ParseRange(%q): %v does not name the value", tc.in, err)
		}
	}
}

func TestAllocate(t *testing.T) {
	k := func(name string, port int32) ports.Key { return ports.Key{Namespace: "demo", Name: name, Port: port} }
	r := ports.Range{First: 100, Last: 103}
	for _, tc := range []struct {
		name          string
		held          map[ports.Key]int32
		want          []ports.Key
		wantPorts     map[ports.Key]int32
		wantExhausted []ports.Key
	}{
		{name: "fresh, lowest first, in key order", want: []ports.Key{k("b", 80), k("a", 80), k("a", 443)},
			wantPorts: map[ports.Key]int32{k("a", 80): 100, k("a", 443): 101, k("b", 80): 102}},
		{name: "held ports are kept, whatever the order (a restart)", held: map[ports.Key]int32{k("b", 80): 100, k("a", 80): 103},
			want: []ports.Key{k("a", 80), k("b", 80), k("c", 80)}, wantPorts: map[ports.Key]int32{k("a", 80): 103, k("b", 80): 100, k("c", 80): 101}},
		{name: "a port held by a key no longer wanted is not reused while held", held: map[ports.Key]int32{k("gone", 80): 100},
			want: []ports.Key{k("new", 80)}, wantPorts: map[ports.Key]int32{k("new", 80): 101}},
		{name: "a port held twice goes to the first key; the other gets a new one", held: map[ports.Key]int32{k("a", 80): 100, k("b", 80): 100},
			want: []ports.Key{k("a", 80), k("b", 80)}, wantPorts: map[ports.Key]int32{k("a", 80): 100, k("b", 80): 101}},
		{name: "a port outside the range (the range changed) is given anew", held: map[ports.Key]int32{k("a", 80): 9000},
			want: []ports.Key{k("a", 80)}, wantPorts: map[ports.Key]int32{k("a", 80): 100}},
		{name: "a key wanted twice gets one port", want: []ports.Key{k("a", 80), k("a", 80)}, wantPorts: map[ports.Key]int32{k("a", 80): 100}},
		{name: "exhausted: held ports stay, the last new keys get none", held: map[ports.Key]int32{k("z", 1): 102},
			want:      []ports.Key{k("a", 1), k("b", 1), k("c", 1), k("d", 1), k("z", 1)},
			wantPorts: map[ports.Key]int32{k("a", 1): 100, k("b", 1): 101, k("c", 1): 103, k("z", 1): 102}, wantExhausted: []ports.Key{k("d", 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, exhausted := ports.Allocate(r, tc.held, tc.want)
			if !maps.Equal(got, tc.wantPorts) {
				t.Errorf("ports %v, want %v", got, tc.wantPorts)
			}
			if len(exhausted) != len(tc.wantExhausted) {
				t.Errorf("exhausted %v, want %v", exhausted, tc.wantExhausted)
			}
			for _, key := range tc.wantExhausted {
				if err := exhausted[key]; err == nil || !strings.Contains(err.Error(), "100-103 are all taken") || !strings.Contains(err.Error(), key.String()) {
					t.Errorf("%s: %v, want an error naming the range and the key", key, err)
				}
			}
			// Allocating again with the result held changes nothing.
			again, _ := ports.Allocate(r, got, tc.want)
			if !maps.Equal(again, got) {
				t.Errorf("allocating again: %v, want %v", again, got)
			}
		})
	}
}
