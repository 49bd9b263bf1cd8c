package armsim

import (
	"fmt"
	"strings"
)

// ID is a parsed Azure resource id:
// /subscriptions/{Subscription}/resourceGroups/{ResourceGroup}/providers/{Namespace}/{Types[0]}/{Names[0]}[/{Types[1]}/{Names[1]}...].
// ARM compares ids case-insensitively; Key gives the form to compare.
type ID struct {
	Subscription  string
	ResourceGroup string
	Namespace     string
	Types         []string
	Names         []string
}

// ParseID parses a resource id (a request path, or a reference in a
// body). Collection paths (an odd number of segments after the
// namespace, as a list request has) are accepted with the last name
// empty.
func ParseID(s string) (ID, error) {
	parts := strings.Split(strings.Trim(s, "/"), "/")
	if len(parts) < 4 || !strings.EqualFold(parts[0], "subscriptions") || !strings.EqualFold(parts[2], "resourceGroups") {
		return ID{}, fmt.Errorf("%q is not a resource group scoped resource id", s)
	}
	id := ID{Subscription: parts[1], ResourceGroup: parts[3]}
	rest := parts[4:]
	if len(rest) == 0 {
		return id, nil
	}
	if len(rest) < 3 || !strings.EqualFold(rest[0], "providers") {
		return ID{}, fmt.Errorf("%q is not a resource id: no providers/{namespace}/{type}", s)
	}
	id.Namespace = rest[1]
	for i := 2; i < len(rest); i += 2 {
		id.Types = append(id.Types, rest[i])
		name := ""
		if i+1 < len(rest) {
			name = rest[i+1]
		}
		if i+1 < len(rest) && name == "" {
			return ID{}, fmt.Errorf("%q has an empty name", s)
		}
		id.Names = append(id.Names, name)
	}
	return id, nil
}

// MustParseID is ParseID for ids a test writes itself.
func MustParseID(s string) ID {
	id, err := ParseID(s)
	if err != nil {
		panic(err)
	}
	return id
}

// String is the id as ARM writes it.
func (id ID) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "/subscriptions/%s/resourceGroups/%s", id.Subscription, id.ResourceGroup)
	if id.Namespace == "" {
		return b.String()
	}
	fmt.Fprintf(&b, "/providers/%s", id.Namespace)
	for i, t := range id.Types {
		b.WriteString("/" + t)
		if id.Names[i] != "" {
			b.WriteString("/" + id.Names[i])
		}
	}
	return b.String()
}

// Key is the id in the case ARM ignores.
func (id ID) Key() string { return strings.ToLower(id.String()) }

// Type is the full resource type, e.g. Microsoft.Network/loadBalancers or
// Microsoft.Network/loadBalancers/frontendIPConfigurations.
func (id ID) Type() string {
	return id.Namespace + "/" + strings.Join(id.Types, "/")
}

// Name is the last name (the resource's own).
func (id ID) Name() string {
	if len(id.Names) == 0 {
		return ""
	}
	return id.Names[len(id.Names)-1]
}

// Parent is the id one level up (a child resource's parent), false for a
// top-level resource.
func (id ID) Parent() (ID, bool) {
	if len(id.Types) < 2 {
		return ID{}, false
	}
	p := id
	p.Types = id.Types[:len(id.Types)-1]
	p.Names = id.Names[:len(id.Names)-1]
	return p, true
}

// Child is the id of a child resource of id.
func (id ID) Child(typ, name string) ID {
	c := id
	c.Types = append(append([]string(nil), id.Types...), typ)
	c.Names = append(append([]string(nil), id.Names...), name)
	return c
}

// ResourceID builds the id of a top-level resource (typ is
// Namespace/type, one type segment).
func ResourceID(subscription, resourceGroup, typ, name string) ID {
	ns, t, _ := strings.Cut(typ, "/")
	return ID{Subscription: subscription, ResourceGroup: resourceGroup, Namespace: ns, Types: strings.Split(t, "/"), Names: []string{name}}
}
