package keys

// Gateway keys.
const (
	// GatewayControllerName is the spec.controllerName of the GatewayClasses
	// that fleetnet-gateway implements.
	GatewayControllerName = "fleetnet.dev/gateway-controller"
)
