package l4

import (
	"errors"
	"syscall"
)

// isReset reports whether a peer reset the connection.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// isRefused reports whether a UDP endpoint answered with ICMP port
// unreachable.
func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
