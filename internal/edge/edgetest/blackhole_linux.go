// Package edgetest holds helpers for the edge's data plane tests.
package edgetest

import (
	"net"
	"strconv"
	"syscall"
	"testing"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
)

// Blackhole is an endpoint on loopback that never completes a
// connection: a listener with an accept queue of one that is full, so
// that the kernel drops every SYN and a dial waits until its timeout, as
// for a stopped pod whose address no longer answers ARP. (Routing to an
// unused address does not do it everywhere: some sandboxes answer every
// connection.)
func Blackhole(t *testing.T) edgev1.Endpoint {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	ep := edgev1.Endpoint{Address: "127.0.0.1", Port: int32(sa.(*syscall.SockaddrInet4).Port), Ready: true, Serving: true}
	// The one connection the queue holds; it is never accepted.
	conn, err := net.Dial("tcp", net.JoinHostPort(ep.Address, strconv.Itoa(int(ep.Port))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return ep
}
