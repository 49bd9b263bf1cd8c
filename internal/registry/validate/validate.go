// Package validate checks registry requests before anything is stored. Every
// error names the field and the value, in the API server's words
// (k8s.io/apimachinery's field errors), so an operator reading it at
// registration time knows what to fix.
package validate

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	aboutv1alpha1 "github.com/fleetnet/fleetnet/api/about/v1alpha1"
	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"google.golang.org/protobuf/proto"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits that keep every record well inside etcd's request size limit.
const (
	MaxPorts             = 100
	MaxEndpointsPerChunk = 1000
	MaxAddresses         = 100
	MaxWeight            = 1000
	// MaxExportTo bounds the clusters an export is scoped to.
	MaxExportTo = 100
	// MaxMetadataBytes bounds exported labels and annotations together.
	MaxMetadataBytes = 64 * 1024
	// MaxExportToSelectorBytes bounds an export's label selector.
	MaxExportToSelectorBytes = 4096
	// MaxClusterProperties bounds the properties a cluster publishes.
	MaxClusterProperties = 64
	// MaxClusterPropertiesBytes bounds their names and values together.
	MaxClusterPropertiesBytes = 16 * 1024
	// MaxChunksWithExport bounds the endpoint chunks written with an
	// export in one PutExport, and MaxChunksWithExportBytes their encoded
	// size together: the transaction stays inside etcd's request size
	// (1.5 MiB by default) and its operations per transaction (128).
	MaxChunksWithExport      = 32
	MaxChunksWithExportBytes = 1 << 20
)

var (
	protocols    = sets.New("TCP", "UDP", "SCTP")
	serviceTypes = sets.New("ClusterSetIP", "Headless")
	affinities   = sets.New("", "None", "ClientIP")
	families     = sets.New("IPv4", "IPv6")
	addressTypes = sets.New("IPv4", "IPv6", "FQDN")
	policies     = sets.New("", "Cluster", "Local")
)

// Cluster validates a registration.
func Cluster(c *registryv1.Cluster, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c == nil {
		return append(errs, field.Required(path, ""))
	}
	errs = append(errs, ClusterID(c.GetId(), path.Child("id"))...)
	errs = append(errs, dns1123Label(c.GetClustersetId(), path.Child("clustersetId"))...)
	for _, msg := range validation.IsValidLabelValue(c.GetRegion()) {
		errs = append(errs, field.Invalid(path.Child("region"), c.GetRegion(), msg))
	}
	if gw := c.GetEastwestGateway(); gw != "" {
		if err := HostPort(gw); err != nil {
			errs = append(errs, field.Invalid(path.Child("eastwestGateway"), gw, err.Error()))
		}
	}
	return append(errs, ClusterProperties(c, path.Child("properties"))...)
}

// HostPort checks an address other clusters dial: host:port, the host an
// IP address or a DNS subdomain, the port 1 to 65535.
func HostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port: %w", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return fmt.Errorf("port %q: want 1 to 65535", port)
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	if msgs := validation.IsDNS1123Subdomain(host); len(msgs) > 0 {
		return fmt.Errorf("host %q: want an IP address or a DNS name: %s", host, strings.Join(msgs, "; "))
	}
	return nil
}

// ClusterProperties checks a cluster's published properties: label keys
// and values, at most MaxClusterProperties of MaxClusterPropertiesBytes in
// all, and the well-known KEP-2149 ones, when present, equal to the
// cluster's id and clusterset id (a cluster cannot claim another's).
func ClusterProperties(c *registryv1.Cluster, path *field.Path) field.ErrorList {
	props := c.GetProperties()
	var errs field.ErrorList
	if len(props) > MaxClusterProperties {
		errs = append(errs, field.TooMany(path, len(props), MaxClusterProperties))
	}
	size := 0
	for _, name := range slices.Sorted(maps.Keys(props)) {
		value := props[name]
		size += len(name) + len(value)
		errs = append(errs, ClusterProperty(name, value, path)...)
	}
	if size > MaxClusterPropertiesBytes {
		errs = append(errs, field.TooLong(path, "", MaxClusterPropertiesBytes))
	}
	for _, own := range []struct{ name, want string }{{aboutv1alpha1.ClusterIDPropertyName, c.GetId()}, {aboutv1alpha1.ClusterSetPropertyName, c.GetClustersetId()}} {
		if got, ok := props[own.name]; ok && got != own.want {
			errs = append(errs, field.Invalid(path.Key(own.name), got, fmt.Sprintf("must be the cluster's own %q", own.want)))
		}
	}
	return errs
}

// ClusterProperty checks one property: its name a label key, its value a
// label value (what a label selector can match). Errors name the property
// (under path) and the bad name or value.
func ClusterProperty(name, value string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(name) {
		errs = append(errs, field.Invalid(path.Key(name), name, "the name must be a label key: "+msg))
	}
	for _, msg := range validation.IsValidLabelValue(value) {
		errs = append(errs, field.Invalid(path.Key(name), value, "the value must be a label value: "+msg))
	}
	return errs
}

// ClusterID validates a cluster id: an RFC 1123 label.
func ClusterID(id string, path *field.Path) field.ErrorList {
	return dns1123Label(id, path)
}

func dns1123Label(v string, path *field.Path) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(path, v, msg))
	}
	return errs
}

// ServiceName validates a namespace and a Service name.
func ServiceName(namespace, name string, path *field.Path) field.ErrorList {
	errs := dns1123Label(namespace, path.Child("namespace"))
	if name == "" {
		return append(errs, field.Required(path.Child("name"), ""))
	}
	for _, msg := range validation.IsDNS1035Label(name) {
		errs = append(errs, field.Invalid(path.Child("name"), name, msg))
	}
	return errs
}

// ExportKey validates the key of an export.
func ExportKey(k *registryv1.ExportKey, path *field.Path) field.ErrorList {
	if k == nil {
		return field.ErrorList{field.Required(path, "")}
	}
	errs := ServiceName(k.GetNamespace(), k.GetName(), path)
	return append(errs, ClusterID(k.GetClusterId(), path.Child("clusterId"))...)
}

// ChunkKey validates the key of an endpoint chunk.
func ChunkKey(k *registryv1.ChunkKey, path *field.Path) field.ErrorList {
	if k == nil {
		return field.ErrorList{field.Required(path, "")}
	}
	errs := ServiceName(k.GetNamespace(), k.GetName(), path)
	errs = append(errs, ClusterID(k.GetClusterId(), path.Child("clusterId"))...)
	if k.GetChunk() == "" {
		return append(errs, field.Required(path.Child("chunk"), ""))
	}
	for _, msg := range validation.IsDNS1123Subdomain(k.GetChunk()) {
		errs = append(errs, field.Invalid(path.Child("chunk"), k.GetChunk(), msg))
	}
	return errs
}

// ChunksWithExport validates the endpoint chunks written with export e in
// one PutExport: each a valid chunk of that export, named once, within
// MaxChunksWithExport and MaxChunksWithExportBytes.
func ChunksWithExport(e *registryv1.Export, chunks []*registryv1.EndpointChunk, path *field.Path) field.ErrorList {
	if len(chunks) > MaxChunksWithExport {
		return field.ErrorList{field.TooMany(path, len(chunks), MaxChunksWithExport)}
	}
	var errs field.ErrorList
	size := 0
	seen := map[string]bool{}
	k := e.GetKey()
	for i, c := range chunks {
		cp := path.Index(i)
		size += proto.Size(c)
		errs = append(errs, Chunk(c, cp)...)
		ck := c.GetKey()
		if ck.GetClusterId() != k.GetClusterId() || ck.GetNamespace() != k.GetNamespace() || ck.GetName() != k.GetName() {
			errs = append(errs, field.Invalid(cp.Child("key"), fmt.Sprintf("%s/%s/%s", ck.GetClusterId(), ck.GetNamespace(), ck.GetName()),
				fmt.Sprintf("must name the export's cluster, namespace and name (%s/%s/%s)", k.GetClusterId(), k.GetNamespace(), k.GetName())))
		}
		if seen[ck.GetChunk()] {
			errs = append(errs, field.Duplicate(cp.Child("key", "chunk"), ck.GetChunk()))
		}
		seen[ck.GetChunk()] = true
	}
	if size > MaxChunksWithExportBytes {
		errs = append(errs, field.TooLong(path, "", MaxChunksWithExportBytes))
	}
	return errs
}

// Export validates an export spec.
func Export(e *registryv1.Export, path *field.Path) field.ErrorList {
	if e == nil {
		return field.ErrorList{field.Required(path, "")}
	}
	errs := ExportKey(e.GetKey(), path.Child("key"))
	if e.GetExportedSince() == nil {
		errs = append(errs, field.Required(path.Child("exportedSince"), ""))
	}
	if !serviceTypes.Has(e.GetType()) {
		errs = append(errs, field.NotSupported(path.Child("type"), e.GetType(), sets.List(serviceTypes)))
	}
	errs = append(errs, servicePorts(e.GetPorts(), path.Child("ports"))...)
	if e.GetType() == "ClusterSetIP" && len(e.GetPorts()) == 0 {
		errs = append(errs, field.Required(path.Child("ports"), "a ClusterSetIP export needs at least one port"))
	}
	if !affinities.Has(e.GetSessionAffinity()) {
		errs = append(errs, field.NotSupported(path.Child("sessionAffinity"), e.GetSessionAffinity(), []string{"None", "ClientIP"}))
	}
	if t := e.GetSessionAffinityTimeoutSeconds(); t < 0 || t > 86400 {
		errs = append(errs, field.Invalid(path.Child("sessionAffinityTimeoutSeconds"), t, "must be between 0 and 86400"))
	}
	if !policies.Has(e.GetInternalTrafficPolicy()) {
		errs = append(errs, field.NotSupported(path.Child("internalTrafficPolicy"), e.GetInternalTrafficPolicy(), []string{"Cluster", "Local"}))
	}
	if td := e.GetTrafficDistribution(); td != "" {
		for _, msg := range validation.IsQualifiedName(td) {
			errs = append(errs, field.Invalid(path.Child("trafficDistribution"), td, msg))
		}
	}
	errs = append(errs, ipFamilies(e.GetIpFamilies(), path.Child("ipFamilies"))...)
	errs = append(errs, metav1validation.ValidateLabels(e.GetLabels(), path.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(e.GetAnnotations(), path.Child("annotations"))...)
	errs = append(errs, reservedKeys(e.GetLabels(), path.Child("labels"))...)
	errs = append(errs, reservedKeys(e.GetAnnotations(), path.Child("annotations"))...)
	size := 0
	for k, v := range e.GetLabels() {
		size += len(k) + len(v)
	}
	for k, v := range e.GetAnnotations() {
		size += len(k) + len(v)
	}
	if size > MaxMetadataBytes {
		errs = append(errs, field.TooLong(path.Child("annotations"), "", MaxMetadataBytes))
	}
	errs = append(errs, ExportTo(e.GetExportTo(), path.Child("exportTo"))...)
	if sel := e.GetExportToSelector(); sel != "" {
		if _, bad := ParseExportToSelector(sel, path.Child("exportToSelector")); len(bad) > 0 {
			errs = append(errs, bad...)
		}
	}
	errs = append(errs, TraceParent(e.GetTraceParent(), path.Child("traceParent"))...)
	if e.GetWeight() > MaxWeight {
		errs = append(errs, field.Invalid(path.Child("weight"), e.GetWeight(), fmt.Sprintf("must be between 0 and %d", MaxWeight)))
	}
	if f := e.GetRegionalFrontend(); f != "" {
		if msg := RegionalFrontend(f); msg != "" {
			errs = append(errs, field.Invalid(path.Child("regionalFrontend"), f, msg))
		}
	}
	if pls := e.GetPrivateLinkService(); pls != "" {
		if msg := RegionalFrontend(pls); msg != "" {
			errs = append(errs, field.Invalid(path.Child("privateLinkService"), pls, msg))
		}
	} else if e.GetPrivateLinkAutoApproval() {
		errs = append(errs, field.Invalid(path.Child("privateLinkAutoApproval"), true, "needs privateLinkService"))
	}
	return errs
}

// MaxRegionalFrontendLength bounds a regional frontend's resource id (an
// Azure resource id is at most a few hundred characters).
const MaxRegionalFrontendLength = 1024

// RegionalFrontend checks a cloud resource id (a regional load balancer
// frontend's, or a private link service's): an absolute path of printable characters without spaces.
// It returns what is wrong, or "".
func RegionalFrontend(id string) string {
	if len(id) > MaxRegionalFrontendLength {
		return fmt.Sprintf("must be at most %d characters", MaxRegionalFrontendLength)
	}
	if !strings.HasPrefix(id, "/") {
		return "must be a resource id starting with /"
	}
	for _, r := range id {
		if r <= ' ' || r == 0x7f {
			return "must not contain spaces or control characters"
		}
	}
	return ""
}

// reservedKeys refuses exported keys that would overwrite the agent's, the
// MCS API's or Kubernetes' own on the ServiceImport.
func reservedKeys(m map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if p := keys.ReservedExportKey(k); p != "" {
			errs = append(errs, field.Invalid(path.Key(k), k, fmt.Sprintf("the prefix %s is reserved", p)))
		}
	}
	return errs
}

func servicePorts(ports []*registryv1.ServicePort, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(ports) > MaxPorts {
		return append(errs, field.TooMany(path, len(ports), MaxPorts))
	}
	type pk struct {
		port     int32
		protocol string
	}
	seen := map[pk]bool{}
	names := map[string]bool{}
	unnamed := 0
	for i, p := range ports {
		pp := path.Index(i)
		errs = append(errs, portNumber(p.GetPort(), pp.Child("port"))...)
		if !protocols.Has(p.GetProtocol()) {
			errs = append(errs, field.NotSupported(pp.Child("protocol"), p.GetProtocol(), sets.List(protocols)))
		}
		if p.GetName() == "" {
			unnamed++
		} else {
			// Service and EndpointSlice port names are DNS-1123 labels
			// ("80-8080", kubectl's default, is one), not IANA service
			// names as container ports are.
			for _, msg := range validation.IsDNS1123Label(p.GetName()) {
				errs = append(errs, field.Invalid(pp.Child("name"), p.GetName(), msg))
			}
			if names[p.GetName()] {
				errs = append(errs, field.Duplicate(pp.Child("name"), p.GetName()))
			}
			names[p.GetName()] = true
		}
		k := pk{p.GetPort(), p.GetProtocol()}
		if seen[k] {
			errs = append(errs, field.Duplicate(pp, fmt.Sprintf("%d/%s", p.GetPort(), p.GetProtocol())))
		}
		seen[k] = true
	}
	if unnamed > 0 && len(ports) > 1 {
		errs = append(errs, field.Required(path, "every port needs a name when there is more than one"))
	}
	return errs
}

func portNumber(p int32, path *field.Path) field.ErrorList {
	if p < 1 || p > 65535 {
		return field.ErrorList{field.Invalid(path, p, "must be between 1 and 65535, inclusive")}
	}
	return nil
}

func ipFamilies(fs []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(fs) > 2 {
		return append(errs, field.TooMany(path, len(fs), 2))
	}
	seen := map[string]bool{}
	for i, f := range fs {
		if !families.Has(f) {
			errs = append(errs, field.NotSupported(path.Index(i), f, sets.List(families)))
		}
		if seen[f] {
			errs = append(errs, field.Duplicate(path.Index(i), f))
		}
		seen[f] = true
	}
	return errs
}

// Chunk validates an endpoint chunk.
func Chunk(c *registryv1.EndpointChunk, path *field.Path) field.ErrorList {
	if c == nil {
		return field.ErrorList{field.Required(path, "")}
	}
	errs := ChunkKey(c.GetKey(), path.Child("key"))
	errs = append(errs, TraceParent(c.GetTraceParent(), path.Child("traceParent"))...)
	at := c.GetAddressType()
	if !addressTypes.Has(at) {
		errs = append(errs, field.NotSupported(path.Child("addressType"), at, sets.List(addressTypes)))
	}
	if len(c.GetPorts()) > MaxPorts {
		errs = append(errs, field.TooMany(path.Child("ports"), len(c.GetPorts()), MaxPorts))
	}
	for i, p := range c.GetPorts() {
		pp := path.Child("ports").Index(i)
		errs = append(errs, portNumber(p.GetPort(), pp.Child("port"))...)
		if !protocols.Has(p.GetProtocol()) {
			errs = append(errs, field.NotSupported(pp.Child("protocol"), p.GetProtocol(), sets.List(protocols)))
		}
		if p.GetName() != "" {
			for _, msg := range validation.IsDNS1123Label(p.GetName()) {
				errs = append(errs, field.Invalid(pp.Child("name"), p.GetName(), msg))
			}
		}
	}
	if len(c.GetEndpoints()) > MaxEndpointsPerChunk {
		return append(errs, field.TooMany(path.Child("endpoints"), len(c.GetEndpoints()), MaxEndpointsPerChunk))
	}
	for i, e := range c.GetEndpoints() {
		ep := path.Child("endpoints").Index(i)
		if n := len(e.GetAddresses()); n == 0 || n > MaxAddresses {
			errs = append(errs, field.Invalid(ep.Child("addresses"), n, fmt.Sprintf("must hold 1 to %d addresses", MaxAddresses)))
		}
		for j, a := range e.GetAddresses() {
			errs = append(errs, address(at, a, ep.Child("addresses").Index(j))...)
		}
		if h := e.GetHostname(); h != "" {
			for _, msg := range validation.IsDNS1123Label(h) {
				errs = append(errs, field.Invalid(ep.Child("hostname"), h, msg))
			}
		}
		for _, msg := range validation.IsValidLabelValue(e.GetZone()) {
			errs = append(errs, field.Invalid(ep.Child("zone"), e.GetZone(), msg))
		}
		if n := e.GetNodeName(); n != "" {
			for _, msg := range validation.IsDNS1123Subdomain(n) {
				errs = append(errs, field.Invalid(ep.Child("nodeName"), n, msg))
			}
		}
		if n := e.GetPodName(); n != "" {
			for _, msg := range validation.IsDNS1123Subdomain(n) {
				errs = append(errs, field.Invalid(ep.Child("podName"), n, msg))
			}
		}
	}
	return errs
}

func address(addressType, a string, path *field.Path) field.ErrorList {
	switch addressType {
	case "FQDN":
		for _, msg := range validation.IsFullyQualifiedDomainName(path, a) {
			return field.ErrorList{msg}
		}
		return nil
	case "IPv4", "IPv6":
		ip, err := netip.ParseAddr(a)
		if err != nil || ip.Zone() != "" {
			return field.ErrorList{field.Invalid(path, a, "must be an IP address")}
		}
		if (addressType == "IPv4") != ip.Is4() {
			return field.ErrorList{field.Invalid(path, a, "must be an "+addressType+" address")}
		}
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() || ip.IsMulticast() {
			return field.ErrorList{field.Invalid(path, a, "may not be a loopback, link-local, unspecified or multicast address")}
		}
	}
	return nil
}

// ExportTo checks an export's scope: cluster ids, each once, at most
// MaxExportTo.
func ExportTo(ids []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(ids) > MaxExportTo {
		errs = append(errs, field.TooMany(path, len(ids), MaxExportTo))
	}
	seen := map[string]bool{}
	for i, id := range ids {
		if seen[id] {
			errs = append(errs, field.Duplicate(path.Index(i), id))
		}
		seen[id] = true
		errs = append(errs, dns1123Label(id, path.Index(i))...)
	}
	return errs
}

// ParseExportTo reads the fleetnet.dev/export-to annotation: cluster ids
// separated by commas (spaces around them allowed), each once. It returns
// them sorted; an empty value is an error (leave the annotation out to
// export to every cluster).
func ParseExportTo(value string, path *field.Path) ([]string, field.ErrorList) {
	if strings.TrimSpace(value) == "" {
		return nil, field.ErrorList{field.Invalid(path, value, "names no cluster: give cluster ids separated by commas, or remove the annotation to export to every cluster")}
	}
	var ids []string
	for _, part := range strings.Split(value, ",") {
		ids = append(ids, strings.TrimSpace(part))
	}
	if errs := ExportTo(ids, path); len(errs) > 0 {
		return nil, errs
	}
	slices.Sort(ids)
	return ids, nil
}

// ParseExportToSelector reads the fleetnet.dev/export-to-selector
// annotation: a label selector in the syntax of kubectl's -l and
// metav1.LabelSelector (=, ==, !=, in, notin, exists, !exists; no < or >),
// of at most MaxExportToSelectorBytes. It returns its canonical form
// (requirements sorted), so that two spellings make the same record. A
// selector of no requirement is an error: it would select every cluster
// (leave the annotation out for that).
func ParseExportToSelector(value string, path *field.Path) (string, field.ErrorList) {
	if len(value) > MaxExportToSelectorBytes {
		return "", field.ErrorList{field.TooLong(path, "", MaxExportToSelectorBytes)}
	}
	sel, err := Selector(value)
	if err != nil {
		return "", field.ErrorList{field.Invalid(path, value, err.Error())}
	}
	if sel.Empty() {
		return "", field.ErrorList{field.Invalid(path, value, "selects every cluster: give a label selector such as env=prod, or remove the annotation to export to every cluster")}
	}
	return sel.String(), nil
}

// comparisons are the operators labels.Parse takes and label selectors do
// not, by their symbols.
var comparisons = map[selection.Operator]string{selection.GreaterThan: ">", selection.LessThan: "<"}

// Selector parses a label selector as labels.Parse does, refusing the <
// and > that metav1.LabelSelector cannot hold.
func Selector(value string) (labels.Selector, error) {
	sel, err := labels.Parse(value)
	if err != nil {
		return nil, fmt.Errorf("not a label selector: %w", err)
	}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		if sym, ok := comparisons[r.Operator()]; ok {
			return nil, fmt.Errorf("not a label selector: %q (in %q) is not supported in label selectors", sym, r.String())
		}
	}
	return sel, nil
}

// Namespaces checks a watch's namespaces: namespace names, each once.
func Namespaces(names []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, n := range names {
		if seen[n] {
			errs = append(errs, field.Duplicate(path.Index(i), n))
		}
		seen[n] = true
		for _, msg := range apivalidation.ValidateNamespaceName(n, false) {
			errs = append(errs, field.Invalid(path.Index(i), n, msg))
		}
	}
	return errs
}

// MaxTraceParentBytes bounds a record's trace_parent: a W3C traceparent
// of version 00 is 55 characters, later versions may add fields.
const MaxTraceParentBytes = 256

// TraceParent checks a record's trace_parent for its size only: one that
// does not parse is ignored (its record starts no trace), not refused.
func TraceParent(tp string, path *field.Path) field.ErrorList {
	if len(tp) > MaxTraceParentBytes {
		return field.ErrorList{field.TooLong(path, "", MaxTraceParentBytes)}
	}
	return nil
}
