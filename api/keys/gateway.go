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
