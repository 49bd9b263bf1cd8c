package l4

import (
	"net"
	"syscall"
)

// tcpListenConfig sets TCP keep-alive on the listening socket, which
// Linux copies to every connection it accepts: the same probes as Go's
// default (15 s idle, 15 s apart, 9 of them) without four system calls per
// connection, which the accept path of a connection-rate load pays for.
func tcpListenConfig() net.ListenConfig {
	return net.ListenConfig{
		KeepAlive: -1,
		Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				for _, o := range [...]struct{ level, opt, v int }{
					{syscall.SOL_SOCKET, syscall.SO_KEEPALIVE, 1},
					{syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE, keepAliveSeconds},
					{syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL, keepAliveSeconds},
					{syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT, keepAliveProbes},
				} {
					if serr = syscall.SetsockoptInt(int(fd), o.level, o.opt, o.v); serr != nil {
						return
					}
				}
			})
			if err != nil {
				return err
			}
			return serr
		},
	}
}
