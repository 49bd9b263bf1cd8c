//go:build !linux

package l4

import (
	"net"
	"time"
)

// tcpListenConfig leaves keep-alive to Go, set on each accepted
// connection: not every system copies it from the listening socket.
func tcpListenConfig() net.ListenConfig {
	return net.ListenConfig{KeepAlive: keepAliveSeconds * time.Second}
}
