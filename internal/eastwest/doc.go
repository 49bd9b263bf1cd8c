// Package eastwest holds the east-west gateway's parts: fleetnet-edge in the
// role that carries ClusterSetIP traffic between clusters of different
// networks. The importing cluster's gateway takes a connection meant for a
// service of another network and carries it, as one stream of an HTTP/2
// connection over mutual TLS with the fleet's cluster identities, to the
// exporting cluster's gateway, which authorizes the stream and dials a
// ready local endpoint (tunnel). The design is in the decision records
// docs/decisions/0166-eastwest-tunnel.md to 0175 (East-west in
// docs/decisions/README.md).
package eastwest
