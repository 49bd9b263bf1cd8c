package proxy

import (
	"crypto/tls"
	"net"
	"runtime"
	"strings"
	"sync"
	"time"
)

// coalescedConn is an HTTP/2 client connection whose writes are gathered
// and written by one goroutine, several at a time.
//
// An HTTP/2 server writes frame by frame (net/http's from its connection
// goroutine, h2server's from each stream's handler): with many streams
// answering at about the same moment, each answer went out in its own TLS
// record and write(2), which was the largest share of the edge's CPU per
// HTTP/2 request. Here Write only appends to a buffer and returns; a
// flusher started by the first pending write sends everything gathered
// meanwhile in one write, so the frames of the streams that answered while
// the last write was in the kernel share the next one (as nginx gathers a
// connection's streams per event-loop pass). Nothing waits for more: a
// lone frame goes out at once.
//
// The connection holds no buffer while nothing is pending. Write blocks
// while coalescedLimit bytes wait (a client that does not read slows the
// server as it would with direct writes); a failed write fails every
// later one; Close sends what is pending first, within closeFlushWait.
type coalescedConn struct {
	net.Conn

	mu   sync.Mutex
	cond sync.Cond // signalled when the flusher took or wrote a batch
	// pending is what Write gathered; nil when nothing waits.
	pending  *[]byte
	flushing bool
	err      error
}

// coalescedLimit bounds the bytes a connection gathers before Write waits
// for the flusher: 64 KiB, the HTTP/2 default window, so that a
// connection's worth of DATA frames fits.
const coalescedLimit = 64 << 10

// closeFlushWait bounds how long Close waits for pending bytes to be
// written: crypto/tls allows its close_notify alert as long. A variable
// for tests.
var closeFlushWait = 5 * time.Second

// h2PrefaceLine is the request line of the preface that opens every
// HTTP/2 connection (RFC 9113, section 3.4), all of it that the fast path
// is sure to have read when it hands a connection over.
var h2PrefaceLine = []byte("PRI * HTTP/2.0\r\n")

var coalesceBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

func newCoalescedConn(c net.Conn) *coalescedConn {
	cc := &coalescedConn{Conn: c}
	cc.cond.L = &cc.mu
	return cc
}

// Write gathers p for the flusher; the error is that of an earlier write.
func (c *coalescedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.err == nil && c.pending != nil && len(*c.pending)+len(p) > coalescedLimit {
		c.cond.Wait()
	}
	if c.err != nil {
		return 0, c.err
	}
	if c.pending == nil {
		c.pending = coalesceBuffers.Get().(*[]byte)
	}
	*c.pending = append(*c.pending, p...)
	if !c.flushing {
		c.flushing = true
		go c.flush()
	}
	return len(p), nil
}

// flush writes what is pending, batch after batch, until nothing is.
func (c *coalescedConn) flush() {
	// Let the goroutines that are ready to run (other streams' handlers
	// answering) append theirs first: with the HTTP/2 server's handlers
	// writing directly, the flusher otherwise ran as soon as the first
	// frame came and took one stream's answer at a time. It waits for
	// nothing that is not already runnable.
	runtime.Gosched()
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.pending != nil {
		batch := c.pending
		c.pending = nil
		c.cond.Broadcast()
		if c.err == nil {
			c.mu.Unlock()
			_, err := c.Conn.Write(*batch)
			c.mu.Lock()
			if err != nil && c.err == nil {
				c.err = err
			}
		}
		*batch = (*batch)[:0]
		coalesceBuffers.Put(batch)
	}
	c.flushing = false
	c.cond.Broadcast()
}

// Close writes what is pending, then closes the connection.
func (c *coalescedConn) Close() error {
	c.mu.Lock()
	if c.flushing && c.err == nil {
		// A client that does not read must not hold Close.
		_ = c.Conn.SetWriteDeadline(time.Now().Add(closeFlushWait))
		for c.flushing {
			c.cond.Wait()
		}
	}
	if c.err == nil {
		c.err = net.ErrClosed
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

// h2CipherAdequate reports whether a TLS connection meets HTTP/2's
// requirements (RFC 9113, section 9.2): TLS 1.3, or TLS 1.2 with an
// ephemeral key exchange and an AEAD cipher. net/http's HTTP/2 server
// checks this on a *tls.Conn; a connection it would refuse is handed to
// it as one, so that it refuses it as the spec says.
func h2CipherAdequate(st tls.ConnectionState) bool {
	if st.Version >= tls.VersionTLS13 {
		return true
	}
	if st.Version < tls.VersionTLS12 {
		return false
	}
	name := tls.CipherSuiteName(st.CipherSuite)
	return strings.HasPrefix(name, "TLS_ECDHE_") && (strings.Contains(name, "_GCM_") || strings.Contains(name, "_CHACHA20_"))
}
