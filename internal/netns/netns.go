// Package netns opens sockets inside a named network namespace (iproute2's
// /run/netns/NAME) from a process that runs outside it.
//
// A socket belongs to the namespace it was created in for its whole life, so
// a process can listen inside a namespace and dial outside it: that is how
// the local fleet's nodes reach the API servers, which listen on the host's
// loopback only.
package netns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// Dir is where iproute2 keeps named network namespaces.
const Dir = "/run/netns"

// Listen listens on addr ("tcp", "127.0.0.1:6443") inside the named
// network namespace.
func Listen(name, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := in(name, func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s in network namespace %s: %w", addr, name, err)
	}
	return l, nil
}

// in runs fn on an OS thread switched into the named namespace. Setns
// changes only the calling thread, so the goroutine is locked to it; when
// the thread cannot be switched back, it stays locked and the runtime
// discards it with the goroutine instead of reusing it.
func in(name string, fn func() error) error {
	target, err := unix.Open(filepath.Join(Dir, name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w (create it with `ip netns add %s`)", filepath.Join(Dir, name), err, name)
	}
	defer unix.Close(target)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("opening this thread's network namespace: %w", err)
			return
		}
		defer unix.Close(self)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("entering network namespace %s: %w", name, err)
			return
		}
		fnErr := fn()
		if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: the runtime ends it with this goroutine.
			done <- fmt.Errorf("leaving network namespace %s: %w", name, err)
			return
		}
		runtime.UnlockOSThread()
		done <- fnErr
	}()
	return <-done
}

// Dialer returns a dial function (for http.Transport.DialContext) whose
// connections start inside the named network namespace. The address must be
// a literal IP and port: a name would be resolved, and a dual-stack one
// raced, on other threads, in the host's namespace.
func Dialer(name string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if _, err := netip.ParseAddrPort(addr); err != nil {
			return nil, fmt.Errorf("dialling %q from network namespace %s: want a literal IP:port: %w", addr, name, err)
		}
		var conn net.Conn
		err := in(name, func() error {
			var d net.Dialer
			var err error
			conn, err = d.DialContext(ctx, network, addr)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("dialling %s from network namespace %s: %w", addr, name, err)
		}
		return conn, nil
	}
}
