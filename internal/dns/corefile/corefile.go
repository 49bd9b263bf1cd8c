// Package corefile adds to a cluster's CoreDNS Corefile the server block
// that forwards the clusterset zone to fleetnet-dns, and takes it out
// again. The block sits between two marker comments, so that adding it
// again replaces it (a new address) and removing it gives back the
// Corefile as it was before, byte for byte.
package corefile

import (
	"fmt"
	"net"
	"strings"

	"github.com/coredns/caddy/caddyfile"
)

// The markers around fleetnet's block.
const (
	beginMarker = "# fleetnet-dns: begin (added by `fleetnetctl dns wire`, removed by `fleetnetctl dns unwire`)"
	endMarker   = "# fleetnet-dns: end"
)

// Block returns the server block that forwards zone to the addresses of
// fleetnet-dns (IP or IP:port), with the markers around it. It caches for
// cacheSeconds (none when 0): no longer than fleetnet-dns's TTL (cache's
// default caps at 3,600 s, which would outlive an import's withdrawal).
func Block(zone string, addrs []string, cacheSeconds int) string {
	var b strings.Builder
	b.WriteString(beginMarker + "\n")
	fmt.Fprintf(&b, "%s:53 {\n", zone)
	b.WriteString("    errors\n")
	if cacheSeconds > 0 {
		fmt.Fprintf(&b, "    cache %d\n", cacheSeconds)
	}
	fmt.Fprintf(&b, "    forward . %s\n", strings.Join(addrs, " "))
	b.WriteString("}\n")
	b.WriteString(endMarker + "\n")
	return b.String()
}

// Wire returns corefile with fleetnet's block (see Block) for zone forwarding to addrs:
// in place of the block it holds, or at its end. It fails when the
// Corefile does not parse, or already has a server block for zone that
// fleetnet did not add: a forward someone configured is theirs to change.
func Wire(corefile, zone string, addrs []string, cacheSeconds int) (string, error) {
	if len(addrs) == 0 {
		return "", fmt.Errorf("no address of fleetnet-dns to forward %s to", zone)
	}
	for _, a := range addrs {
		host := a
		if h, _, err := net.SplitHostPort(a); err == nil {
			host = h
		}
		if net.ParseIP(host) == nil {
			return "", fmt.Errorf("address %q of fleetnet-dns: not an IP or IP:port", a)
		}
	}
	rest, err := without(corefile)
	if err != nil {
		return "", err
	}
	keys, err := ServerZones(rest)
	if err != nil {
		return "", err
	}
	for _, k := range keys {
		if k == normalZone(zone) {
			return "", fmt.Errorf("the Corefile already has a server block for %s that fleetnet-dns did not add; remove it, or keep it and do not wire", zone)
		}
	}
	block := Block(zone, addrs, cacheSeconds)
	if start, end, ok := find(corefile); ok {
		return corefile[:start] + block + corefile[end:], nil
	}
	if rest != "" && !strings.HasSuffix(rest, "\n") {
		rest += "\n"
	}
	return rest + block, nil
}

// Unwire returns corefile without fleetnet's block; as it is when it has
// none. It fails when only one of the markers is there (an edit by hand
// cut the block), rather than guess where it ends.
func Unwire(corefile string) (string, error) {
	return without(corefile)
}

// Wired reports whether corefile holds fleetnet's block.
func Wired(corefile string) bool {
	_, _, ok := find(corefile)
	return ok
}

// ServerZones returns the zones of corefile's server blocks, lowercase,
// without scheme, port or final dot.
func ServerZones(corefile string) ([]string, error) {
	blocks, err := caddyfile.Parse("Corefile", strings.NewReader(corefile), nil)
	if err != nil {
		return nil, fmt.Errorf("parsing the Corefile: %w", err)
	}
	var zones []string
	for _, b := range blocks {
		for _, k := range b.Keys {
			zones = append(zones, normalZone(k))
		}
	}
	return zones, nil
}

// HasPlugin reports whether a server block of corefile uses plugin (e.g.
// reload, which makes CoreDNS read a changed Corefile by itself).
func HasPlugin(corefile, plugin string) (bool, error) {
	blocks, err := caddyfile.Parse("Corefile", strings.NewReader(corefile), nil)
	if err != nil {
		return false, fmt.Errorf("parsing the Corefile: %w", err)
	}
	for _, b := range blocks {
		if _, ok := b.Tokens[plugin]; ok {
			return true, nil
		}
	}
	return false, nil
}

// normalZone turns a server block key ("dns://Clusterset.Local.:53") into
// a zone ("clusterset.local").
func normalZone(key string) string {
	k := strings.ToLower(key)
	if i := strings.Index(k, "://"); i >= 0 {
		k = k[i+3:]
	}
	if h, _, err := net.SplitHostPort(k); err == nil {
		k = h
	}
	return strings.TrimSuffix(k, ".")
}

// find returns where fleetnet's block starts and ends (after the end
// marker's line).
func find(corefile string) (start, end int, ok bool) {
	start = strings.Index(corefile, beginMarker)
	if start < 0 {
		return 0, 0, false
	}
	e := strings.Index(corefile[start:], endMarker)
	if e < 0 {
		return 0, 0, false
	}
	end = start + e + len(endMarker)
	if end < len(corefile) && corefile[end] == '\n' {
		end++
	}
	return start, end, true
}

// without returns corefile without fleetnet's block.
func without(corefile string) (string, error) {
	begin, endMark := strings.Contains(corefile, beginMarker), strings.Contains(corefile, endMarker)
	if begin != endMark {
		return "", fmt.Errorf("the Corefile has only one of fleetnet-dns's markers (%q, %q): it was edited by hand; fix it so both or neither remain", beginMarker, endMarker)
	}
	start, end, ok := find(corefile)
	if !ok {
		return corefile, nil
	}
	return corefile[:start] + corefile[end:], nil
}
