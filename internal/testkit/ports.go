package testkit

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"testing"
)

// FreePort returns a loopback port free for TCP and UDP at the time of
// the call. Someone else may take it before the caller binds it; tests
// and harnesses accept that race.
func FreePort(t testing.TB) int {
	t.Helper()
	return FreePorts(t, 1)[0]
}

// FreeAddr is FreePort as an address: "127.0.0.1:<port>".
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}

// FreePorts returns n distinct loopback ports, each free for TCP and UDP
// at the time of the call.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := PickFreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// PickFreePorts is FreePorts for a harness without a testing.TB. Each port
// is free for UDP too, for servers that bind both (DNS, an L4 proxy); the
// ports are held until all n are found, so they are distinct.
func PickFreePorts(n int) ([]int, error) {
	var ports []int
	var held []io.Closer
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries == n+100 {
			return nil, fmt.Errorf("finding %d free ports: %d found for both TCP and UDP in %d tries", n, len(ports), tries)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		if err != nil {
			continue // taken for UDP: try another
		}
		held = append(held, u)
		ports = append(ports, port)
	}
	return ports, nil
}
