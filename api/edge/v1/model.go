package edgev1

// The model: what fleetnet-gateway sends and fleetnet-edge serves, as the
// JSON document inside a ModelUpdate (EncodeModel, DecodeModel). It is the
// contract between the two: fleetnet-gateway's model builder
// (internal/gateway/model) produces it from Gateway API objects, the
// providers (the edge, Azure) consume it, and neither imports the other. It
// depends on no Kubernetes API package.

// Model is everything the entry point serves, for every Gateway of
// fleetnet's GatewayClasses.
type Model struct {
	// Version is a hash of the rest of the model's JSON; equal versions
	// serve the same.
	Version string `json:"version"`
	// Gateways are sorted by namespace and name.
	Gateways []Gateway `json:"gateways"`
	// LoadBalancers are the accepted MultiClusterLoadBalancers of the
	// classes the providers serve, sorted by namespace and name.
	LoadBalancers []LoadBalancer `json:"loadBalancers,omitempty"`
	// EastWest is what an edge in the east-west role (a member cluster's
	// gateway, fed by its agent) carries for other clusters; nil for the
	// fleet's entry point. What it sends to them is among LoadBalancers
	// (clusters with Via).
	EastWest *EastWest `json:"eastWest,omitempty"`
}

// EastWest is the receiving side of a cluster's east-west gateway.
type EastWest struct {
	// Exports are the cluster's exports other clusters may reach through
	// the gateway, sorted by namespace and name.
	Exports []EastWestExport `json:"exports"`
}

// EastWestExport is one export as the gateway serves it: who may reach it
// (the registry's ExportStatus, as view.StatusAudience reads it) and its
// TCP ports' endpoints here.
type EastWestExport struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// ToEveryCluster and ImportedBy are the registry's status of the
	// export: every cluster may reach it, or those named alone.
	ToEveryCluster bool     `json:"toEveryCluster,omitempty"`
	ImportedBy     []string `json:"importedBy,omitempty"`
	// Ports are the export's TCP ports, sorted by port.
	Ports []EastWestPort `json:"ports"`
}

// EastWestPort is a service port and the endpoints that serve it.
type EastWestPort struct {
	Port int32 `json:"port"`
	// Endpoints are sorted by address then port; the gateway dials the
	// ready ones that are not terminating (Serving without Ready is not
	// enough: a stream is a new connection).
	Endpoints []Endpoint `json:"endpoints"`
}

// LoadBalancer is one MultiClusterLoadBalancer: L4 listeners in front of
// the endpoints of an imported service in every cluster.
type LoadBalancer struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
	// Class is the provider's: edge or azure-cross-region.
	Class string `json:"class"`
	// Ports are sorted by port then protocol.
	Ports []LoadBalancerPort `json:"ports"`
	// HealthCheck is a TCP connect check (Type is always TCP).
	HealthCheck          HealthCheck `json:"healthCheck"`
	ConnectTimeoutMillis int64       `json:"connectTimeoutMillis"`
	// TCPIdleMillis closes a TCP connection idle both ways this long.
	TCPIdleMillis int64 `json:"tcpIdleMillis"`
	// UDPIdleMillis ends a UDP flow without a datagram this long.
	UDPIdleMillis int64 `json:"udpIdleMillis"`
	// DrainMillis is how long established connections to a draining
	// cluster, or to a port no longer served, may continue.
	DrainMillis int64 `json:"drainMillis"`
	// Refused and Hold: see Gateway's.
	Refused string `json:"refused,omitempty"`
	Hold    bool   `json:"hold,omitempty"`
}

// Defaults of a load balancer's timeouts, which an edge also takes for a
// zero in the model.
const (
	DefaultTCPIdleMillis = int64(60 * 60 * 1000) // an hour
	DefaultUDPIdleMillis = int64(60 * 1000)      // a minute
	DefaultDrainMillis   = int64(30 * 1000)
)

// L4 protocols of a LoadBalancerPort.
const (
	ProtocolTCP = "TCP"
	ProtocolUDP = "UDP"
)

// LoadBalancerPort is one exposed port and the endpoints behind it. A
// connection (TCP) or flow (UDP) goes to a cluster chosen in proportion to
// its EffectiveWeight (weight × ready endpoints, 0 when draining), then to
// one of its healthy endpoints, as for an HTTP backend.
type LoadBalancerPort struct {
	Port     int32  `json:"port"`
	Protocol string `json:"protocol"`
	// TargetPort is the ServiceImport's port; the endpoints listen on the
	// port their EndpointSlices give it.
	TargetPort int32 `json:"targetPort"`
	// Clusters are sorted by cluster id.
	Clusters []ClusterEndpoints `json:"clusters"`
}

// Gateway is one accepted Gateway and its programmable listeners.
type Gateway struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
	// Class is the Gateway's GatewayClass, which selects its provider. It
	// is not in JSON: spec.gatewayClassName is in the spec, so a change
	// of class changes Generation, which is.
	Class string `json:"-"`
	// UID is the Gateway's, for cloud providers' ownership tags.
	UID string `json:"uid,omitempty"`
	// Address, when set, is the Gateway's own address, assigned from
	// fleetnet-gateway's address pool (--gateway-address-pool): the edges
	// bind its listeners there, so that Gateways with addresses of their
	// own may use the same port numbers. Empty: the edges' listen host,
	// shared by every Gateway without one; fleetnet-gateway then gives
	// each shared port's protocol, and each hostname on it, to one
	// Gateway only (the oldest).
	Address string `json:"address,omitempty"`
	// Annotations are the Gateway's fleetnet.dev/azure-* annotations
	// (keys.AzureAnnotationPrefix) but the controller's own, which tune a
	// cloud provider; they change no Generation, so they are in JSON.
	Annotations map[string]string `json:"annotations,omitempty"`
	// Listeners are the accepted, resolved, unconflicted listeners, sorted
	// by port then name; invalid ones are left out so that no provider
	// configures a port the status says is broken.
	Listeners []Listener `json:"listeners"`
	// Refused, when set, says why the object's current generation is not
	// accepted. The entry is then its last accepted configuration
	// (Generation says which), kept so that a mistake in an edit does not
	// withdraw what serves (fail static); it goes only when the object is
	// deleted or leaves the provider's class.
	Refused string `json:"refused,omitempty"`
	// Hold: refused, and the controller does not know the last accepted
	// configuration (it restarted since): the entry has no listeners and
	// a provider keeps whatever it serves for the object, changing and
	// withdrawing nothing.
	Hold bool `json:"hold,omitempty"`
}

// Protocols of a Listener.
const (
	ProtocolHTTP  = "HTTP"
	ProtocolHTTPS = "HTTPS"
)

// Listener is one port and hostname of a Gateway. Several listeners may
// share a port (with different hostnames): a provider picks, for each
// request (by SNI, then Host), the listener with the most specific
// matching hostname, as the spec's listener precedence says.
type Listener struct {
	Name     string `json:"name"`
	Port     int32  `json:"port"`
	Protocol string `json:"protocol"`
	// Hostname is the listener's hostname, "" for any.
	Hostname string `json:"hostname,omitempty"`
	// Certificates terminate TLS for HTTPS, in the listener's order (the
	// first is the default when SNI selects none).
	Certificates []ListenerCertificate `json:"certificates,omitempty"`
	// VirtualHosts are sorted by hostname.
	VirtualHosts []VirtualHost `json:"virtualHosts"`
}

// ListenerCertificate is a kubernetes.io/tls Secret that a listener presents.
type ListenerCertificate struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Digest is the SHA-256 of the certificate and key, so that a rotated
	// Secret changes the model's Version without the key appearing in
	// JSON, logs or golden files.
	Digest string `json:"digest"`
	// CertPEM and KeyPEM are the Secret's tls.crt and tls.key; a provider
	// that terminates TLS needs them, and they never go into JSON.
	CertPEM []byte `json:"-"`
	KeyPEM  []byte `json:"-"`
}

// VirtualHost is a hostname (exact, "*.suffix", or "*" for any) and the
// routes served for it, in match precedence order: the first route that
// matches a request serves it.
type VirtualHost struct {
	Hostname string  `json:"hostname"`
	Routes   []Route `json:"routes"`
}

// Route is one match of one rule of an HTTPRoute.
type Route struct {
	// RouteNamespace, RouteName, Rule and Match say where it comes from:
	// the HTTPRoute, the index of its rule and of the match in the rule.
	RouteNamespace string `json:"routeNamespace"`
	RouteName      string `json:"routeName"`
	Rule           int    `json:"rule"`
	Match          int    `json:"match"`

	Path        PathMatch    `json:"path"`
	Method      string       `json:"method,omitempty"`
	Headers     []ValueMatch `json:"headers,omitempty"`
	QueryParams []ValueMatch `json:"queryParams,omitempty"`

	// Filters apply in order.
	Filters  []Filter `json:"filters,omitempty"`
	Timeouts Timeouts `json:"timeouts,omitzero"`
	// Backends share the traffic by Weight; see Backend for the rule.
	Backends []Backend `json:"backends,omitempty"`
	// DirectResponse, when set, answers every request of this route with
	// its status instead of forwarding: a rule without backends and
	// without a redirect, or one that fleetnet cannot serve as written.
	DirectResponse *DirectResponse `json:"directResponse,omitempty"`
}

// Path match types.
const (
	PathExact  = "Exact"
	PathPrefix = "PathPrefix"
)

// PathMatch matches the request path.
type PathMatch struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// Value match types.
const (
	MatchExact             = "Exact"
	MatchRegularExpression = "RegularExpression"
)

// ValueMatch matches a header or query parameter. Header names are
// lowercased (they are case-insensitive); query parameter names are not.
type ValueMatch struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Timeouts of a route, in milliseconds; 0 means none.
type Timeouts struct {
	RequestMillis        int64 `json:"requestMillis,omitempty"`
	BackendRequestMillis int64 `json:"backendRequestMillis,omitempty"`
}

// DirectResponse is an answer the entry point gives itself.
type DirectResponse struct {
	Status int `json:"status"`
	// Reason says why, for access logs.
	Reason string `json:"reason"`
}

// Filter types.
const (
	FilterRequestHeaderModifier  = "RequestHeaderModifier"
	FilterResponseHeaderModifier = "ResponseHeaderModifier"
	FilterRequestRedirect        = "RequestRedirect"
	FilterURLRewrite             = "URLRewrite"
	FilterRequestMirror          = "RequestMirror"
)

// Filter is one filter; exactly the field of its Type is set.
type Filter struct {
	Type                   string          `json:"type"`
	RequestHeaderModifier  *HeaderModifier `json:"requestHeaderModifier,omitempty"`
	ResponseHeaderModifier *HeaderModifier `json:"responseHeaderModifier,omitempty"`
	RequestRedirect        *Redirect       `json:"requestRedirect,omitempty"`
	URLRewrite             *Rewrite        `json:"urlRewrite,omitempty"`
	RequestMirror          *Mirror         `json:"requestMirror,omitempty"`
}

// Mirror sends a copy of a share of a rule's requests (Numerator in
// Denominator) to Backend, whose answers are dropped: the original request
// goes on as if there were no mirror.
type Mirror struct {
	Backend     Backend `json:"backend"`
	Numerator   int32   `json:"numerator"`
	Denominator int32   `json:"denominator"`
}

// Header is a header name and value.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// HeaderModifier sets, adds and removes headers, in that order.
type HeaderModifier struct {
	Set    []Header `json:"set,omitempty"`
	Add    []Header `json:"add,omitempty"`
	Remove []string `json:"remove,omitempty"`
}

// Path modifier types.
const (
	PathReplaceFull   = "ReplaceFullPath"
	PathReplacePrefix = "ReplacePrefixMatch"
)

// PathModifier rewrites the path: the whole of it, or the prefix that the
// route's PathPrefix match matched.
type PathModifier struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// Redirect answers with a redirect; unset fields keep the request's.
type Redirect struct {
	Scheme     string        `json:"scheme,omitempty"`
	Hostname   string        `json:"hostname,omitempty"`
	Port       int32         `json:"port,omitempty"`
	Path       *PathModifier `json:"path,omitempty"`
	StatusCode int           `json:"statusCode"`
}

// Rewrite changes the request's host and path before forwarding.
type Rewrite struct {
	Hostname string        `json:"hostname,omitempty"`
	Path     *PathModifier `json:"path,omitempty"`
}

// Backend kinds.
const (
	KindService       = "Service"
	KindServiceImport = "ServiceImport"
)

// Backend is one backendRef of a rule, expanded to the endpoints of every
// cluster that serves it.
//
// Traffic is split in two steps. First a backend is chosen in proportion
// to Weight among the route's backends (a route whose weights are all 0
// answers 500, as Gateway API requires). Then, for a valid backend, a
// cluster is chosen in proportion to its EffectiveWeight, and an endpoint
// of that cluster uniformly among its ready ones. A backend that is
// Invalid answers 500 for its share, one with no EffectiveWeight anywhere
// (no ready endpoint, or every cluster drained) 503: the shares of other
// backends are never touched, as the spec requires.
//
// EffectiveWeight is the cluster's weight (fleetnet.dev/weight, default 1)
// times its ready endpoints, not the cluster weight alone. With the default
// weights every endpoint of the clusterset then gets the same share, as
// with a ClusterSetIP, so a cluster with one pod is not sent as much as one
// with ten; the weight still shifts traffic between clusters, and 0 drains
// a cluster. The two steps keep backendRef weights exact (no rounding into
// one flat list) and let a data plane that ejects endpoints recompute a
// cluster's weight locally as weight × endpoints it still trusts.
type Backend struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Port is the backendRef's port; 0 for a ServiceImport without one,
	// which means all its ports.
	Port   int32 `json:"port,omitempty"`
	Weight int32 `json:"weight"`
	// Filters apply to requests sent to this backend only.
	Filters []Filter `json:"filters,omitempty"`
	// Invalid is why the reference does not resolve; its share gets 500.
	Invalid *Invalid `json:"invalid,omitempty"`
	// NoReadyEndpoints: valid, but its share gets 503.
	NoReadyEndpoints bool `json:"noReadyEndpoints,omitempty"`
	// AppProtocol is the port's appProtocol (h2c, ...), if the reference
	// names one port and it has one.
	AppProtocol string `json:"appProtocol,omitempty"`
	// Clusters are sorted by cluster id.
	Clusters []ClusterEndpoints `json:"clusters,omitempty"`
	// Policy is how the entry point checks, retries and spreads traffic
	// over the endpoints.
	Policy BackendPolicy `json:"policy"`
}

// Invalid is a Gateway API reason and a message.
type Invalid struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// ClusterEndpoints are the endpoints of a backend in one cluster.
type ClusterEndpoints struct {
	Cluster string `json:"cluster"`
	Region  string `json:"region,omitempty"`
	// Weight is the cluster's fleetnet.dev/weight.
	Weight int32 `json:"weight"`
	// EffectiveWeight is Weight × ready endpoints (distinct addresses).
	EffectiveWeight int64 `json:"effectiveWeight"`
	// Draining (load balancers only): no new connections; established
	// ones may continue until the load balancer's DrainMillis.
	Draining bool `json:"draining,omitempty"`
	// RegionalFrontend (load balancers only) is the cloud resource id of
	// the cluster's regional load balancer frontend for the service
	// (keys.AnnotationRegionalFrontend), "" when the cluster has none.
	RegionalFrontend string `json:"regionalFrontend,omitempty"`
	// PrivateLinkService is the cloud resource id of the Private Link
	// Service in front of the cluster's internal load balancer for the
	// service (keys.AnnotationPrivateLinkService), "" when none;
	// PrivateLinkAutoApproval says its owner lets the gateway controller
	// approve the entry point's connection (keys.AnnotationPLSApproval).
	PrivateLinkService      string `json:"privateLinkService,omitempty"`
	PrivateLinkAutoApproval bool   `json:"privateLinkAutoApproval,omitempty"`
	// Endpoints are sorted by address then port.
	Endpoints []Endpoint `json:"endpoints"`
	// Via (load balancers only), when set, says the cluster is on another
	// network: its endpoints are reached through its east-west gateway,
	// and Endpoints holds that gateway alone.
	Via *Via `json:"via,omitempty"`
}

// Via is how an edge in the east-west role reaches a cluster of another
// network: a stream through that cluster's gateway (internal/eastwest/
// tunnel) for one service port. The gateway picks the endpoint there.
type Via struct {
	// Namespace, Name and Port are the service port the stream is for.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Port      int32  `json:"port"`
	// ReadyEndpoints are the cluster's ready endpoints behind the gateway:
	// the cluster's share of connections is its weight times these, as a
	// cluster reached directly has weight times its endpoints.
	ReadyEndpoints int32 `json:"readyEndpoints"`
}

// Endpoint is one address and port of a backend.
type Endpoint struct {
	Address string `json:"address"`
	Port    int32  `json:"port"`
	Ready   bool   `json:"ready"`
	Serving bool   `json:"serving"`
}

// Health check types.
const (
	HealthCheckTCP  = "TCP"
	HealthCheckHTTP = "HTTP"
)

// Locality modes.
const (
	// LocalityWeighted spreads traffic over every cluster by weight.
	LocalityWeighted = "Weighted"
	// LocalityLocalFirst sends traffic to the clusters of the serving
	// edge's region while any of their endpoints is healthy, then to those
	// of each step of BackendPolicy.Failover in turn, then to the others
	// by weight.
	LocalityLocalFirst = "LocalFirst"
)

// BackendPolicy is how the entry point treats a backend's endpoints: the
// defaults, or those of the BackendTrafficPolicy that targets the backend.
// Every field is set; a data plane that receives a zero BackendPolicy (from
// a controller older than the field) uses DefaultBackendPolicy.
type BackendPolicy struct {
	// Source is the BackendTrafficPolicy's namespace/name, "" for the
	// defaults.
	Source      string             `json:"source,omitempty"`
	HealthCheck HealthCheck        `json:"healthCheck"`
	Passive     PassiveHealthCheck `json:"passive"`
	Retry       Retry              `json:"retry"`
	// ConnectTimeoutMillis bounds a connection attempt to an endpoint.
	ConnectTimeoutMillis int64 `json:"connectTimeoutMillis"`
	// BackendRequestMillis bounds each attempt when the route's rule sets
	// no backendRequest timeout; 0 means none.
	BackendRequestMillis int64 `json:"backendRequestMillis,omitempty"`
	// Locality is LocalityWeighted or LocalityLocalFirst.
	Locality string `json:"locality"`
	// Failover (LocalFirst only) are the steps traffic goes to, in order,
	// when the edge's region has no healthy endpoint: each a cluster or a
	// region, from the BackendTrafficPolicy's failover.order.
	Failover []FailoverStep `json:"failover,omitempty"`
}

// FailoverStep is a cluster or a region of a failover order.
type FailoverStep struct {
	Cluster string `json:"cluster,omitempty"`
	Region  string `json:"region,omitempty"`
}

// Matches reports whether the step names the cluster or its region.
func (s FailoverStep) Matches(cluster, region string) bool {
	return (s.Cluster != "" && s.Cluster == cluster) || (s.Region != "" && s.Region == region)
}

// HealthCheck is the active check of every endpoint of a backend: a TCP
// connect, or an HTTP GET of Path (healthy on 200–399) with Hostname as
// the Host header (the endpoint's address when empty). UnhealthyThreshold
// failures in a row take an endpoint out, HealthyThreshold successes bring
// it back.
type HealthCheck struct {
	Type               string `json:"type"`
	Path               string `json:"path,omitempty"`
	Hostname           string `json:"hostname,omitempty"`
	IntervalMillis     int64  `json:"intervalMillis"`
	TimeoutMillis      int64  `json:"timeoutMillis"`
	HealthyThreshold   int32  `json:"healthyThreshold"`
	UnhealthyThreshold int32  `json:"unhealthyThreshold"`
}

// PassiveHealthCheck ejects endpoints on what forwarding sees: a failed
// connection takes an endpoint out at once (the active check brings it
// back); Consecutive5xx 5xx responses in a row (0: never) take it out for
// at least EjectionMillis.
type PassiveHealthCheck struct {
	Consecutive5xx int32 `json:"consecutive5xx"`
	EjectionMillis int64 `json:"ejectionMillis"`
}

// Retry sends an idempotent request again, up to Attempts more times, each
// on an endpoint of a cluster not tried yet while one remains: when an
// attempt fails before a response, or answers with one of Codes.
type Retry struct {
	Attempts int32   `json:"attempts"`
	Codes    []int32 `json:"codes,omitempty"`
}

// DefaultBackendPolicy is the policy of a backend that no
// BackendTrafficPolicy targets: a stopped endpoint is found within about
// a second, well before a registry lease or a DNS TTL would, and a failed
// attempt is tried once more on another cluster.
func DefaultBackendPolicy() BackendPolicy {
	return BackendPolicy{
		HealthCheck: HealthCheck{
			Type: HealthCheckTCP, IntervalMillis: 500, TimeoutMillis: 300,
			HealthyThreshold: 1, UnhealthyThreshold: 2,
		},
		Passive:              PassiveHealthCheck{Consecutive5xx: 5, EjectionMillis: 10_000},
		Retry:                Retry{Attempts: 1},
		ConnectTimeoutMillis: 1000,
		Locality:             LocalityWeighted,
	}
}
