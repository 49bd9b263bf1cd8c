// Package tunnel is the east-west gateways' stream protocol: HTTP/2
// CONNECT (RFC 9113 §8.5) over TLS 1.3, both sides presenting the fleet
// certificate of their cluster. A stream's :authority names the service
// and port it is for, "<name>.<namespace>.svc.clusterset.local:<port>", as
// a workload would; the receiving gateway decides what it may reach
// (Server.Authorize) and answers 200 before the stream carries the
// connection's bytes both ways.
package tunnel

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Domain is the clusterset's DNS suffix a target names (KEP-1645).
const Domain = "svc.clusterset.local"

// Target is the service port a stream is for.
type Target struct {
	Namespace string
	Name      string
	Port      int32
}

// Authority is the target as a CONNECT request's :authority.
func (t Target) Authority() string {
	return t.Name + "." + t.Namespace + "." + Domain + ":" + strconv.Itoa(int(t.Port))
}

func (t Target) String() string {
	return t.Namespace + "/" + t.Name + ":" + strconv.Itoa(int(t.Port))
}

// ParseAuthority reads a CONNECT :authority, strictly: one service and
// namespace, each an RFC 1123 label (a Service's name is one), the
// clusterset's domain, and a port of 1 to 65535. Anything else is refused
// with the part that is wrong: the gateway dials only what this names.
func ParseAuthority(authority string) (Target, error) {
	host, portStr, ok := strings.Cut(authority, ":")
	if !ok || strings.Contains(portStr, ":") {
		return Target{}, fmt.Errorf("authority %q: want <service>.<namespace>.%s:<port>", authority, Domain)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != portStr {
		return Target{}, fmt.Errorf("authority %q: port %q is not 1 to 65535", authority, portStr)
	}
	rest, ok := strings.CutSuffix(strings.ToLower(host), "."+Domain)
	if !ok {
		return Target{}, fmt.Errorf("authority %q: the host is not in %s", authority, Domain)
	}
	name, ns, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(ns, ".") {
		return Target{}, fmt.Errorf("authority %q: want <service>.<namespace>.%s", authority, Domain)
	}
	for _, part := range []struct{ what, v string }{{"service", name}, {"namespace", ns}} {
		if errs := validation.IsDNS1123Label(part.v); len(errs) > 0 {
			return Target{}, fmt.Errorf("authority %q: %s %q: %s", authority, part.what, part.v, strings.Join(errs, "; "))
		}
	}
	return Target{Namespace: ns, Name: name, Port: int32(port)}, nil
}
