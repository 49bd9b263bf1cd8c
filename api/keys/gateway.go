package keys

// Gateway keys.
const (
	// GatewayControllerName is the spec.controllerName of the GatewayClasses
	// that fleetnet-gateway implements.
	GatewayControllerName = "fleetnet.dev/gateway-controller"
)

// Field managers of fleetnet-gateway.
const (
	// FieldManagerGateway owns what fleetnet-gateway applies.
	FieldManagerGateway = "fleetnet-gateway"
	// FieldManagerGatewayStatus owns the status fleetnet-gateway writes.
	FieldManagerGatewayStatus = "fleetnet-gateway-status"
)

// Event reasons of fleetnet-gateway.
const (
	// ReasonDeployFailed: the provider refused or failed to deploy the
	// model; the previous configuration stays (Warning event on Gateways).
	ReasonDeployFailed = "DeployFailed"
)

// What fleetnet-gateway keeps in its own namespace (--state-namespace).
const (
	// SecretTypeLastAccepted is the type of the Secrets that keep, one per
	// Gateway or MultiClusterLoadBalancer, the spec of its last accepted
	// generation, so that a refused edit keeps that generation serving
	// across restarts and leader changes of fleetnet-gateway. Secrets,
	// not ConfigMaps: they hold every tenant's specs, and only
	// fleetnet-gateway writes or reads them.
	SecretTypeLastAccepted = "fleetnet.dev/last-accepted"
	// LabelLastAccepted ("true") marks those Secrets, which
	// fleetnet-gateway lists at start.
	LabelLastAccepted = "fleetnet.dev/last-accepted"
	// AnnotationLastAcceptedObject on such a Secret names its object:
	// kind/namespace/name.
	AnnotationLastAcceptedObject = "fleetnet.dev/last-accepted-object"
	// LastAcceptedSpecKey is the Secret's data key of the spec (JSON,
	// with its generation).
	LastAcceptedSpecKey = "spec.json"
)
