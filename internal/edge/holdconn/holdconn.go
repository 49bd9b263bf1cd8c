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
// is the next thing to read. A peer that closed the connection wakes the
// wait with the reset its kernel answers the request with. One that
// closed only its writing half before the reset and still reads would
// never answer: the wait is bounded by a guard (Guard), after which the
// read tries as usual and sees the end at once.
package holdconn

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// MaxHeld is the largest write Hold keeps back; a larger one is sent at
// once (a request that large is not waiting on one system call).
const MaxHeld = 16 << 10

// keptCap bounds the buffer an idle connection keeps for the next held
// write: most requests are a head of a few hundred bytes.
const keptCap = 4 << 10

// Guard bounds a held read's wait for readiness. Past it the read tries
// as usual, under the caller's deadline: an answer slower than Guard
// costs one more wake-up, a peer that will never answer (it closed its
// writing half before the wait began) costs Guard instead of the
// caller's whole deadline.
const Guard = 100 * time.Millisecond

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

	// The state of a held read, kept here so that its function (readFn,
	// made once) allocates nothing.
	readFn func(fd uintptr) bool
	sent   int
	buf    []byte
	n      int
	werr   error
	rerr   error
	guard  *time.Timer

	mu sync.Mutex
	// readDeadline is the caller's, restored after the guard moved it.
	readDeadline time.Time
	// waiting: a held read is under way; tripped: its guard moved the
	// read deadline to the past.
	waiting, tripped bool
}

// New wraps c.
func New(c *net.TCPConn) (*Conn, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	hc := &Conn{TCPConn: c, rc: rc}
	hc.readFn = hc.sendThenRead
	return hc, nil
}

// Hold keeps the next write back until the next Read, when it is the
// first write since the last Read and at most MaxHeld bytes: the Read
// sends it and waits for the answer without a read that finds nothing.
// A write after the held one sends both at once. When that Read fails,
// the held bytes may not have been sent: the connection is done with.
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
	if err := c.beforeWrite(); err != nil {
		return 0, err
	}
	return c.TCPConn.Write(b)
}

// ReadFrom is Write's, for io.Copy (bufio.Writer's ReadFrom calls it).
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if err := c.beforeWrite(); err != nil {
		return 0, err
	}
	return c.TCPConn.ReadFrom(r)
}

// beforeWrite sends what is held ahead of a write that is not held.
func (c *Conn) beforeWrite() error {
	c.hold, c.wrote = false, true
	return c.sendHeld()
}

// sendHeld writes the held bytes, if any, the usual way.
func (c *Conn) sendHeld() error {
	if len(c.held) == 0 {
		return nil
	}
	held := c.held
	c.held = c.held[:0]
	if cap(c.held) > keptCap {
		c.held = nil
	}
	_, err := c.TCPConn.Write(held)
	return err
}

// WriteTo is Read's, for io.Copy (bufio.Reader's WriteTo calls it).
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	c.hold, c.wrote = false, false
	if err := c.sendHeld(); err != nil {
		return 0, err
	}
	return c.TCPConn.WriteTo(w)
}

// SetDeadline is net.Conn's; the read deadline is kept to restore it
// after a guard.
func (c *Conn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readDeadline = t
	return c.TCPConn.SetDeadline(t)
}

// SetReadDeadline is net.Conn's; see SetDeadline.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readDeadline = t
	return c.TCPConn.SetReadDeadline(t)
}

// Read reads into b. With bytes held, it sends them first and then waits
// until the socket is readable (for at most Guard) before reading.
func (c *Conn) Read(b []byte) (int, error) {
	c.hold, c.wrote = false, false
	if len(c.held) == 0 || len(b) == 0 {
		if err := c.sendHeld(); err != nil {
			return 0, err
		}
		return c.TCPConn.Read(b)
	}
	c.sent, c.buf, c.n, c.werr, c.rerr = 0, b, 0, nil, nil
	c.mu.Lock()
	c.waiting = true
	c.mu.Unlock()
	if c.guard == nil {
		c.guard = time.AfterFunc(Guard, c.trip)
	} else {
		c.guard.Reset(Guard)
	}
	err := c.rc.Read(c.readFn)
	c.guard.Stop()
	c.mu.Lock()
	c.waiting = false
	tripped := c.tripped
	if tripped {
		c.tripped = false
		_ = c.TCPConn.SetReadDeadline(c.readDeadline)
	}
	c.mu.Unlock()
	c.buf = nil
	rest := c.held[c.sent:]
	c.held = c.held[:0]
	if cap(c.held) > keptCap {
		c.held = nil
	}
	switch {
	case err != nil && tripped:
		// No answer within Guard: read as usual, under the caller's
		// deadline (which may be what ended the wait, or a Close).
		if len(rest) > 0 {
			if _, err := c.TCPConn.Write(rest); err != nil {
				return 0, err
			}
		}
		return c.TCPConn.Read(b)
	case err != nil:
		if oe, ok := err.(*net.OpError); ok {
			oe.Op = "read" // not "raw-read": the caller asked for a read
		}
		return 0, err
	case c.werr != nil:
		return 0, &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: c.werr}
	case len(rest) > 0:
		if _, err := c.TCPConn.Write(rest); err != nil {
			return 0, err
		}
		return c.TCPConn.Read(b)
	case c.rerr != nil:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("read", c.rerr)}
	case c.n == 0:
		return 0, io.EOF
	}
	return c.n, nil
}

// sendThenRead is the held read's function for RawConn.Read: it sends
// the held bytes, reports "not ready" so that the runtime waits for
// readability, and then reads.
func (c *Conn) sendThenRead(fd uintptr) bool {
	if c.sent < len(c.held) {
		for c.sent < len(c.held) {
			m, err := syscall.Write(int(fd), c.held[c.sent:])
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				// The send buffer is full: the rest is written by Read,
				// waiting on the poller to write.
				return true
			case err != nil:
				c.werr = os.NewSyscallError("write", err)
				return true
			}
			c.sent += m
		}
		// Sent: the answer is what comes next.
		return false
	}
	for {
		c.n, c.rerr = syscall.Read(int(fd), c.buf)
		if c.rerr != syscall.EINTR {
			break
		}
	}
	return c.rerr != syscall.EAGAIN
}

// trip ends a held read's wait that outlasted Guard.
func (c *Conn) trip() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiting {
		c.tripped = true
		_ = c.TCPConn.SetReadDeadline(time.Unix(1, 0))
	}
}
