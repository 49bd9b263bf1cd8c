package proxy

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/fleetnet/fleetnet/internal/edge/holdconn"
	"github.com/fleetnet/fleetnet/internal/edge/http1"
)

// upstreams are the fast path's keep-alive connections to endpoints: per
// endpoint address a stack of idle connections, the most recently used
// on top (it is the least likely to have been closed by the backend), on
// the request's goroutine, without a reader or writer goroutine per
// connection.
type upstreams struct {
	pools sync.Map // hostport → *upPool
	done  chan struct{}
	once  sync.Once
}

const (
	// maxIdlePerEndpoint is the keep-alive pool per endpoint, as the
	// net/http path's MaxIdleConnsPerHost.
	maxIdlePerEndpoint = 256
	// upstreamIdleTimeout closes connections unused this long.
	upstreamIdleTimeout = 90 * time.Second
	// holdIdleMax: a request on a connection idle longer is not held
	// (flushRequest): the endpoint may have half-closed it meanwhile.
	holdIdleMax         = time.Second
	upstreamReadBuffer  = 16 << 10
	upstreamWriteBuffer = 8 << 10
)

type upPool struct {
	mu   sync.Mutex
	idle []*upConn
	// retired: retain took the pool out of the map; what is put back
	// into it is closed.
	retired bool
}

// upConn is a connection to an endpoint.
type upConn struct {
	conn *holdconn.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	// head is the response head read last.
	head http1.Message
	// since: put back in the pool at.
	since time.Time
	// hold: the next request may be held until the read of its answer
	// (flushRequest).
	hold bool
	// deadline: a deadline was set on conn, to clear before reuse.
	deadline bool
	// pool is its endpoint's pool when it was taken or dialed: one
	// that retain retired meanwhile closes it instead of keeping it.
	pool *upPool
}

func newUpstreams() *upstreams {
	u := &upstreams{done: make(chan struct{})}
	go u.sweep()
	return u
}

// get returns an idle connection to hostport, or dials one within
// timeout (and before deadline, when set); reused tells which.
func (u *upstreams) get(hostport string, fresh bool, timeout time.Duration, deadline time.Time) (up *upConn, reused bool, err error) {
	v, ok := u.pools.Load(hostport)
	if !ok {
		v, _ = u.pools.LoadOrStore(hostport, &upPool{})
	}
	p := v.(*upPool)
	if !fresh {
		now := time.Now()
		p.mu.Lock()
		for len(p.idle) > 0 {
			up = p.idle[len(p.idle)-1]
			p.idle = p.idle[:len(p.idle)-1]
			if idle := now.Sub(up.since); idle < upstreamIdleTimeout {
				up.hold = idle < holdIdleMax
				break
			}
			_ = up.conn.Close()
			up = nil
		}
		p.mu.Unlock()
		if up != nil {
			return up, true, nil
		}
	}
	d := net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Deadline: deadline}
	c, err := d.DialContext(context.Background(), "tcp", hostport)
	if err != nil {
		return nil, false, err
	}
	hc, err := holdconn.New(c.(*net.TCPConn))
	if err != nil {
		_ = c.Close()
		return nil, false, err
	}
	return &upConn{conn: hc, br: bufio.NewReaderSize(hc, upstreamReadBuffer), bw: bufio.NewWriterSize(hc, upstreamWriteBuffer), pool: p, hold: true}, false, nil
}

// flushRequest sends what is left of a request in bw. A request sent in
// this one write is held until the read of its answer (holdconn), which
// then waits for it instead of first trying a read that finds nothing.
// Not on a connection that was idle for long: an endpoint may have
// closed only its writing half meanwhile (a lingering close), would take
// the request and never answer, and the held read would wait out its
// guard (holdconn.Guard); a read that tries first sees the end at once.
func (up *upConn) flushRequest() error {
	if up.hold {
		up.conn.Hold()
	}
	return up.bw.Flush()
}

// alive reports whether a pooled connection is still open (see
// connAlive); bytes already buffered are an answer nobody asked for.
func (up *upConn) alive() bool {
	return up.br.Buffered() == 0 && connAlive(up.conn)
}

// connAlive reports whether an idle connection is still open: a peek that
// does not wait finds nothing to read (EOF, or an early answer, means the
// endpoint is done with it). It costs a system call, so it is asked only
// before a request that could not be sent again. (A read with a past
// deadline would not do: Go fails it before reading.) The peek runs
// under Control, not Read: net/http's transport keeps a read pending on
// its idle connections, which holds the descriptor's read lock.
func connAlive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var peekErr error
	var b [1]byte
	if err := rc.Control(func(fd uintptr) {
		_, _, peekErr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}); err != nil {
		return false
	}
	return errors.Is(peekErr, syscall.EAGAIN)
}

// put returns a connection whose last exchange ended cleanly to its pool.
func (u *upstreams) put(up *upConn) {
	if up.deadline {
		if up.conn.SetDeadline(time.Time{}) != nil {
			_ = up.conn.Close()
			return
		}
		up.deadline = false
	}
	p := up.pool
	up.since = time.Now()
	p.mu.Lock()
	if p.retired || len(p.idle) >= maxIdlePerEndpoint {
		p.mu.Unlock()
		_ = up.conn.Close()
		return
	}
	p.idle = append(p.idle, up)
	p.mu.Unlock()
}

// sweep closes connections idle too long, so that the pools of endpoints
// no longer routed to empty.
func (u *upstreams) sweep() {
	t := time.NewTicker(upstreamIdleTimeout / 3)
	defer t.Stop()
	for {
		select {
		case <-u.done:
			u.closeAll(0)
			return
		case <-t.C:
			u.closeAll(upstreamIdleTimeout)
		}
	}
}

// closeAll closes the idle connections unused for at least age.
func (u *upstreams) closeAll(age time.Duration) {
	now := time.Now()
	u.pools.Range(func(_, v any) bool {
		p := v.(*upPool)
		p.mu.Lock()
		kept := p.idle[:0]
		for _, up := range p.idle {
			if now.Sub(up.since) >= age {
				_ = up.conn.Close()
			} else {
				kept = append(kept, up)
			}
		}
		clear(p.idle[len(kept):])
		p.idle = kept
		p.mu.Unlock()
		return true
	})
}

// retain closes the idle connections to endpoints keep does not hold and
// forgets their pools. A model that no longer routes to an endpoint (its
// pod stopping or gone) would otherwise keep them for upstreamIdleTimeout,
// and a connection to a pod whose network is gone is found dead only by a
// request sent on it. A request in flight to such an endpoint closes its
// connection when it ends: the connection's pool is retired.
func (u *upstreams) retain(keep map[string]struct{}) {
	u.pools.Range(func(k, v any) bool {
		if _, ok := keep[k.(string)]; ok {
			return true
		}
		u.pools.Delete(k)
		p := v.(*upPool)
		p.mu.Lock()
		p.retired = true
		for _, up := range p.idle {
			_ = up.conn.Close()
		}
		p.idle = nil
		p.mu.Unlock()
		return true
	})
}

func (u *upstreams) close() { u.once.Do(func() { close(u.done) }) }
