package testkit

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
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
// ports are held until all n are found, so they are distinct. They come
// from above the kernel's ephemeral range when there is room: a port the
// kernel hands out for ":0" is one it also gives to outgoing connections,
// which took such a port between the pick and the listen under make
// test's load.
func PickFreePorts(n int) ([]int, error) {
	var ports []int
	var held []io.Closer
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	lo, hi, fixed := portRange()
	for tries := 0; len(ports) < n; tries++ {
		if tries == n+100 {
			return nil, fmt.Errorf("finding %d free ports: %d found for both TCP and UDP in %d tries", n, len(ports), tries)
		}
		addr := "127.0.0.1:0"
		if fixed {
			addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(lo+rand.IntN(hi-lo+1)))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if fixed {
				continue // taken: try another
			}
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		if err != nil {
			continue // taken for UDP: try another
		}
		held = append(held, u)
		if !handOut(port) {
			continue // handed out before, maybe not bound yet: another
		}
		ports = append(ports, port)
	}
	return ports, nil
}

// handedOut are the ports this process's picks returned: a test that picks
// a port, then another, and binds them later must not get one twice.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// handOut records port as handed out; false when it was already.
func handOut(port int) bool {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports[port] {
		return false
	}
	handedOut.ports[port] = true
	return true
}

// portRange is the range above the kernel's ephemeral ports, when it holds
// at least 1,000 ports; fixed is false otherwise (the kernel picks).
func portRange() (lo, hi int, fixed bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, false
	}
	top, err := strconv.Atoi(f[1])
	if err != nil || 65535-top < 1000 {
		return 0, 0, false
	}
	return top + 1, 65535, true
}
