package skew

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	cases := []struct {
		server, client string
		ok             bool
	}{
		{"v0.3.0", "v0.3.0", true},
		{"v0.3.0", "v0.3.7", true},
		{"v0.3.0", "v0.3.1-dev", true},
		{"v0.3.2", "v0.2.9", true},
		{"v0.3.0-dev", "v0.2.0", true},
		{"v0.3.0", "v0.1.0", false}, // two releases back
		{"v0.3.0", "v0.4.0", false}, // newer than its server
		{"v0.3.0", "v1.0.0", false},
		{"v0.3.0", "", false}, // v0.0.0
		{"v0.1.0", "", true},  // the builds before announcements
		{"v0.1.0", "v0.0.5", true},
		{"v0.0.1", "v0.0.0", true},
		{"v1.4.0", "v1.0.0", true}, // after 1.0 a major version is a release
		{"v2.0.0", "v1.9.0", true},
		{"v2.0.0", "v0.9.0", false},
		{"v1.0.0", "v0.9.0", false},
		{"v0.3.0", "latest", false},
		{"v0.3.0", "0.3.0", false}, // semantic versions start with v
	}
	for _, tc := range cases {
		err := Check(tc.server, "fleetnet-agent", tc.client)
		if (err == nil) != tc.ok {
			t.Errorf("Check(server %s, client %q) = %v, want ok=%v", tc.server, tc.client, err, tc.ok)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), "fleetnet-agent") {
			t.Errorf("Check(server %s, client %q) = %q: the component is not named", tc.server, tc.client, err)
		}
		if err != nil && !(strings.Contains(err.Error(), tc.server) && strings.Contains(err.Error(), "docs/upgrades.md")) {
			t.Errorf("Check(server %s, client %q) = %q: want both versions and the policy named", tc.server, tc.client, err)
		}
	}
}

func TestParseCapabilities(t *testing.T) {
	c := ParseCapabilities("a, b", "", "c")
	for _, want := range []string{"a", "b", "c"} {
		if !c.Has(want) {
			t.Errorf("%v lacks %q", c, want)
		}
	}
	if c.Has("") || len(c) != 3 {
		t.Errorf("%v: want exactly a, b, c", c)
	}
}
