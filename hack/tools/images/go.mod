// Module images builds, from source, the programs that stand in for the
// well-known test images (registry.k8s.io/gateway-api/echo-basic) when the
// local fleet's process node runs a Pod's containers as local processes.
// agnhost is built from hack/tools/kube, whose kubernetes module ships it.
// It is separate from the main module so that the Gateway API conformance
// module's dependencies never constrain fleetnet's own.
module github.com/fleetnet/fleetnet/hack/tools/images

go 1.26.0

tool sigs.k8s.io/gateway-api/conformance/echo-basic

require (
	golang.org/x/net v0.55.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
	golang.org/x/text v0.37.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260427160629-7cedc36a6bc4 // indirect
	google.golang.org/grpc v1.81.1 // indirect
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af // indirect
	sigs.k8s.io/gateway-api/conformance v1.6.3 // indirect
)
