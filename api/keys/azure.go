package keys

// Azure Front Door keys: the Gateway annotations that tune how a Gateway
// is programmed into an Azure Front Door profile, the tags on the Azure
// resources fleetnet creates, and the Gateway annotation that keeps
// long-running operations across a restart. Every annotation with
// AzureAnnotationPrefix is parsed strictly
// (internal/gateway/provider/azure/frontdoor/annotations): an unknown one,
// a malformed value or an incompatible combination makes the Gateway
// Accepted=False naming the key and value.
const (
	// AzureAnnotationPrefix starts every Azure annotation of a Gateway.
	AzureAnnotationPrefix = "fleetnet.dev/azure-"

	// AnnotationAzureSKU overrides the GatewayClass's Front Door tier:
	// Standard or Premium.
	AnnotationAzureSKU = "fleetnet.dev/azure-sku"
	// AnnotationAzureWAFPolicy is the resource id of a Front Door WAF
	// policy (Microsoft.Network/FrontDoorWebApplicationFirewallPolicies)
	// to attach to every domain of the Gateway through a security policy.
	AnnotationAzureWAFPolicy = "fleetnet.dev/azure-waf-policy"
	// AnnotationAzureProbePath is the health probe's path (default /).
	AnnotationAzureProbePath = "fleetnet.dev/azure-probe-path"
	// AnnotationAzureProbeProtocol is Http or Https (default Http).
	AnnotationAzureProbeProtocol = "fleetnet.dev/azure-probe-protocol"
	// AnnotationAzureProbeMethod is HEAD or GET (default HEAD).
	AnnotationAzureProbeMethod = "fleetnet.dev/azure-probe-method"
	// AnnotationAzureProbeInterval is the probe interval in whole seconds,
	// 1 to 255 (default 30).
	AnnotationAzureProbeInterval = "fleetnet.dev/azure-probe-interval"
	// AnnotationAzureSampleSize is the load-balancing sample size, 1 to
	// 255 (default 4).
	AnnotationAzureSampleSize = "fleetnet.dev/azure-sample-size"
	// AnnotationAzureSuccessfulSamples is how many of the samples must
	// succeed, 1 to the sample size (default 3).
	AnnotationAzureSuccessfulSamples = "fleetnet.dev/azure-successful-samples"
	// AnnotationAzureOriginHostHeader is the Host header sent to origins
	// (default: the request's host).
	AnnotationAzureOriginHostHeader = "fleetnet.dev/azure-origin-host-header"
	// AnnotationAzureConnectivity is public (origins are the exported
	// Services' LoadBalancer addresses) or private-link (Premium only:
	// origins reach each cluster's Private Link Service).
	AnnotationAzureConnectivity = "fleetnet.dev/azure-connectivity"
	// AnnotationAzurePLSResourceGroup is the resource group of the member
	// clusters' Private Link Services when they publish only a name
	// (private-link only).
	AnnotationAzurePLSResourceGroup = "fleetnet.dev/azure-pls-resource-group"

	// AnnotationAzureListenerCertificates names, per HTTPS listener, the
	// Key Vault secret holding the certificate Front Door presents for the
	// listener's hostnames instead of an AFD-managed one: comma-separated
	// entries <listener name>=<Key Vault secret resource id>, the id as
	// /subscriptions/{id}/resourceGroups/{group}/providers/Microsoft.KeyVault/vaults/{vault}/secrets/{name}
	// (Front Door follows its latest version). The entries' syntax is
	// checked with the other annotations (Accepted=False); a reference of
	// the wrong shape or naming no listener leaves only that listener
	// unserved, named in the Programmed message. A wildcard hostname
	// needs one: Front Door's managed certificates do not cover wildcard
	// domains.
	AnnotationAzureListenerCertificates = "fleetnet.dev/azure-listener-certificates"

	// AnnotationAzureOperations is written by fleetnet-gateway on a
	// Gateway served by Front Door: the resume tokens of its long-running
	// operations (JSON, by resource id), so that a restarted controller
	// resumes them instead of starting over.
	AnnotationAzureOperations = "fleetnet.dev/azure-operations"
)

// Tags on the Azure Front Door resources fleetnet creates (profiles and
// endpoints; child resources cannot carry tags and are owned through
// their profile and their name prefix). Azure tag names cannot contain
// '/'.
const (
	// TagAzureOwner is the fleet (the provider's owner id): the provider
	// changes and deletes only resources carrying its own.
	TagAzureOwner = "fleetnet-owner"
	// TagAzureGatewayNamespace and TagAzureGatewayName are the Gateway's.
	TagAzureGatewayNamespace = "fleetnet-gateway-namespace"
	TagAzureGatewayName      = "fleetnet-gateway-name"
	// TagAzureGatewayUID is the Gateway's UID, when the model has it.
	TagAzureGatewayUID = "fleetnet-gateway-uid"
)

// TagAzurePLSApproval on a member cluster's Private Link Service, with
// the value "auto", lets fleetnet-gateway approve Front Door's private
// endpoint connection to it; without it the connection waits for the
// PLS owner's approval. (A tag, not a fleetnet.dev/pls-approval
// annotation: Azure tag names cannot hold '/', and the PLS owner, not
// the Service's exporter, decides who may connect.)
const TagAzurePLSApproval = "fleetnet-pls-approval"

// TagAzureOwnerService is the tag cloud-provider-azure puts on a Private
// Link Service it makes for a Service (azure-pls-create), naming that
// Service as namespace/name. fleetnet-gateway approves a connection on a
// ServiceExport's keys.AnnotationPLSApproval only on a Private Link
// Service that this tag names the exported Service's.
const TagAzureOwnerService = "k8s-azure-owner-service"

// Reasons of the Azure providers' failures, for Programmed=False and
// Warning events (armerr.Reason picks one): the kind of failure, so that
// an operator sees a permissions problem apart from an outage.
const (
	// ReasonAzureRequestFailed: Azure refused a request (400, 404, ...) or
	// it did not reach Azure; the message is the ARM error code and message.
	ReasonAzureRequestFailed = "AzureRequestFailed"
	// ReasonAzureAuthorizationFailed: 401 or 403; the identity lacks a role
	// assignment (docs/azure-front-door.md lists them).
	ReasonAzureAuthorizationFailed = "AzureAuthorizationFailed"
	// ReasonAzureThrottled: 429, after the SDK's retries honouring
	// Retry-After.
	ReasonAzureThrottled = "AzureThrottled"
	// ReasonAzureConflict: 409, another operation kept running.
	ReasonAzureConflict = "AzureConflict"
	// ReasonAzureUnavailable: a 5xx from Azure.
	ReasonAzureUnavailable = "AzureUnavailable"
	// ReasonAzureOperationFailed: a long-running operation ended Failed,
	// or Front Door's deployment of a resource did (deploymentStatus
	// Failed).
	ReasonAzureOperationFailed = "AzureOperationFailed"
	// ReasonAzureTimeout: a wait passed its bound (an operation still
	// running or a request unanswered, a custom domain's validation or a
	// Private Link connection still pending); polling goes on.
	ReasonAzureTimeout = "AzureTimeout"
	// ReasonAzureLimitExceeded: the Gateway's Front Door graph would take
	// its profile past one of the tier's limits (routes, origin groups,
	// origins, custom domains, rule sets, rules per rule set, ...); nothing
	// is written, and the message names the limit, the tier, the number
	// needed and the maximum.
	ReasonAzureLimitExceeded = "AzureLimitExceeded"
)
