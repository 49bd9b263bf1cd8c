// Package holdconn provides a TCP connection that can hold a request back
// until the read of its answer, so that the read waits for the answer
// instead of trying first.
//
// Go's network reads are optimistic: a read tries the system call, and
// only when it fails with EAGAIN does the goroutine park until the
// poller says the socket is readable. For a proxy that writes a request
// upstream and at once reads the answer, the first try nearly always
// fails: each request costs a read that finds nothing, a system call
// nginx does not make (it reads only after epoll reports data). Reading
// through syscall.RawConn.Read with a function that first reports "not
// ready" would wait instead, but RawConn.Read forgets the readiness the
// poller noted before it was called, so an answer that came before the
// call would never wake it. Sending the request inside that function
// closes the gap: the readiness is forgotten before the request leaves,
// and any answer comes after it.
//
// The wait needs the peer to answer the held write, and nothing else to
// be pending: the caller holds only a request sent whole, whose answer
// is the next thing to read. A peer that closed the connection is woken
// on by the reset its kernel answers the request with; one that closed
// only its writing half and still reads would never answer, so a caller
// does not hold a request on a connection idle long enough for that.
package holdconn

import (
	"io"
	"net"
	"os"
	"syscall"
)

// MaxHeld is the largest write Hold keeps back; a larger one is sent at
// once (a request that large is not waiting on one system call).
const MaxHeld = 16 << 10

// keptCap bounds the buffer an idle connection keeps for the next held
// write: most requests are a head of a few hundred bytes.
const keptCap = 4 << 10

// Conn is a TCP connection whose writes can be held back until the next
// Read. It is used by one goroutine at a time, as a proxy's pooled
// upstream connection is; Close, SetDeadline and the like may be called
// from any goroutine.
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn
	// hold: the next write, if it is the first since the last read, is
	// kept in held for the next Read to send.
	hold bool
	// wrote: a write since the last read.
	wrote bool
	held  []byte
}

// New wraps c.
func New(c *net.TCPConn) (*Conn, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &Conn{TCPConn: c, rc: rc}, nil
}

// Hold keeps the next write back until the next Read, when it is the
// first write since the last Read and at most MaxHeld bytes: the Read
// sends it and waits for the answer without a read that finds nothing.
// A write after the held one sends both at once.
func (c *Conn) Hold() { c.hold = true }

// Held reports the bytes a Read has yet to send.
func (c *Conn) Held() int { return len(c.held) }

// Write writes b, or keeps it for the next Read (see Hold).
func (c *Conn) Write(b []byte) (int, error) {
	if c.hold && !c.wrote && len(b) <= MaxHeld {
		c.hold, c.wrote = false, true
		c.held = append(c.held[:0], b...)
		return len(b), nil
	}
	c.hold, c.wrote = false, true
	if len(c.held) > 0 {
		if err := c.sendHeld(); err != nil {
			return 0, err
		}
	}
	return c.TCPConn.Write(b)
}

// sendHeld writes the held bytes the usual way.
func (c *Conn) sendHeld() error {
	held := c.held
	c.held = c.held[:0]
	_, err := c.TCPConn.Write(held)
	return err
}

// Read reads into b. With bytes held, it sends them first and then waits
// until the socket is readable before reading.
func (c *Conn) Read(b []byte) (int, error) {
	c.hold, c.wrote = false, false
	if len(c.held) == 0 {
		return c.TCPConn.Read(b)
	}
	sent := 0
	var n int
	var werr, rerr error
	err := c.rc.Read(func(fd uintptr) bool {
		if sent < len(c.held) {
			for sent < len(c.held) {
				m, err := syscall.Write(int(fd), c.held[sent:])
				switch {
				case err == syscall.EINTR:
					continue
				case err == syscall.EAGAIN:
					// The send buffer is full: the rest is written
					// below, waiting on the poller to write.
					return true
				case err != nil:
					werr = os.NewSyscallError("write", err)
					return true
				}
				sent += m
			}
			// Sent: the answer is what comes next.
			return false
		}
		for {
			n, rerr = syscall.Read(int(fd), b)
			if rerr != syscall.EINTR {
				break
			}
		}
		return rerr != syscall.EAGAIN
	})
	rest := c.held[sent:]
	c.held = c.held[:0]
	if cap(c.held) > keptCap {
		c.held = nil
	}
	switch {
	case err != nil:
		return 0, err
	case werr != nil:
		return 0, &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: werr}
	case len(rest) > 0:
		if _, err := c.TCPConn.Write(rest); err != nil {
			return 0, err
		}
		return c.TCPConn.Read(b)
	case rerr != nil:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("read", rerr)}
	case n == 0 && len(b) > 0:
		return 0, io.EOF
	}
	return n, nil
}
