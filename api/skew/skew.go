// Package skew is fleetnet's version skew policy and how binaries announce
// their versions to each other: the registry's gRPC API and the edge model
// streams. docs/upgrades.md states the policy for users.
//
// The policy: a server at release N (a minor version before 1.0, a major
// version after) serves clients at N-1 and N. A client newer than its
// server is refused, and so is one two releases behind: upgrade servers
// first (the registry before agents, fleetnet-gateway before its edges, an
// agent before its east-west gateway), one release at a time.
//
// Each client announces its version and capabilities in the request
// metadata of every call (MetadataVersion, MetadataCapabilities); a server
// answers with its own in the response headers. A client that announces
// nothing predates announcements: it is v0.0.0, the builds before v0.1.0.
// Behaviours added later get a capability, and a server sends them only
// to a client that announces it; protobuf fields a client does not know
// it ignores, so a new field is only a capability when ignoring it would
// be wrong.
package skew

import (
	"fmt"
	"strings"

	"golang.org/x/mod/semver"
)

const (
	// MetadataVersion is the gRPC metadata key of the caller's (request)
	// or the server's (response header) version.
	MetadataVersion = "fleetnet-version"
	// MetadataCapabilities is the gRPC metadata key of the caller's or
	// the server's capabilities, comma-separated.
	MetadataCapabilities = "fleetnet-capabilities"
	// MetadataComponent is the gRPC metadata key naming the calling
	// program (fleetnet-agent, fleetnetctl, ...), for messages and metrics.
	MetadataComponent = "fleetnet-component"
)

// Unannounced is the version of a peer that announced none: a build from
// before v0.1.0, which did not announce.
const Unannounced = "v0.0.0"

// Policy names the policy in refusals.
const Policy = "a server serves clients of its own release and the one before; upgrade servers first, one release at a time (docs/upgrades.md)"

// Release is v's release line: "v0.1" before 1.0 (minor versions break
// compatibility), "v1" after.
func Release(v string) string {
	if semver.Major(v) == "v0" {
		return semver.MajorMinor(v)
	}
	return semver.Major(v)
}

// previous is the release line before r ("" for the first).
func previous(r string) string {
	if strings.HasPrefix(r, "v0.") {
		var minor int
		if _, err := fmt.Sscanf(r, "v0.%d", &minor); err != nil || minor == 0 {
			return ""
		}
		return fmt.Sprintf("v0.%d", minor-1)
	}
	var major int
	if _, err := fmt.Sscanf(r, "v%d", &major); err != nil {
		return ""
	}
	if major == 1 {
		// v1's predecessor is the last v0 release line; which one is not
		// known here, so v1 serves only v1.
		return ""
	}
	return fmt.Sprintf("v%d", major-1)
}

// Normalize returns peer's announced version as a semantic version:
// Unannounced for "", an error for what is not semantic.
func Normalize(announced string) (string, error) {
	if announced == "" {
		return Unannounced, nil
	}
	if !semver.IsValid(announced) {
		return "", fmt.Errorf("version %q is not a semantic version (vMAJOR.MINOR.PATCH)", announced)
	}
	return announced, nil
}

// Check says whether a server at version server serves a client that
// announced client (its component names it in the message, e.g.
// "fleetnet-agent"). The error names both versions and the policy.
func Check(server, component, client string) error {
	c, err := Normalize(client)
	if err != nil {
		return fmt.Errorf("%s: %w; this server is at %s: %s", orClient(component), err, server, Policy)
	}
	sr, cr := Release(server), Release(c)
	if sr == cr || (cr != "" && cr == previous(sr)) {
		return nil
	}
	return fmt.Errorf("%s %s is not supported by this server at %s: %s", orClient(component), c, server, Policy)
}

func orClient(component string) string {
	if component == "" {
		return "client"
	}
	return component
}

// Capabilities is a set of announced capabilities.
type Capabilities map[string]bool

// ParseCapabilities reads a MetadataCapabilities value.
func ParseCapabilities(values ...string) Capabilities {
	c := Capabilities{}
	for _, v := range values {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				c[f] = true
			}
		}
	}
	return c
}

// Has reports whether the peer announced capability.
func (c Capabilities) Has(capability string) bool { return c[capability] }
