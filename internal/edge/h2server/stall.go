package h2server

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/net/http2"
)

// A client that stops reading holds what its streams hold: handlers and
// their upstream connections. It can stop in two ways, and each is bounded
// by the server's send timeout (nginx's send_timeout bounds the same
// waits, between two successive writes):
//
//   - It gives no flow-control window (SETTINGS_INITIAL_WINDOW_SIZE 0, no
//     WINDOW_UPDATE), legal in HTTP/2. A stream whose writer waited for
//     window this long is reset with CANCEL, "the stream is no longer
//     needed" (RFC 9113, section 7): the client broke no rule, so not
//     FLOW_CONTROL_ERROR, which says it did; and not REFUSED_STREAM, which
//     would tell it the request was not processed and may be retried.
//     When every open stream of the connection waits and the client has
//     not sent a frame for half the timeout either, nothing shows that it
//     will take anything: the whole connection ends with GOAWAY
//     ENHANCE_YOUR_CALM, the code RFC 9113 gives for treating suspicious
//     activity as a connection error (section 10.5), in one frame rather
//     than a reset per stream.
//   - It does not read the socket: the kernel's buffers fill and a write
//     blocks. Each write runs under a deadline of the timeout; one that
//     expires ends the connection (no GOAWAY: the socket takes nothing).
//
// The waits are checked by one timer per connection, armed while a stream
// waits for window; the deadline of writes is moved at most every eighth
// of the timeout, so that a write does not cost a timer update.

// errSendTimeout fails the writes of a stream reset because its client
// gave it no window for the send timeout.
var errSendTimeout = fmt.Errorf("h2server: the client took no more of the answer within the send timeout: %w", os.ErrDeadlineExceeded)

// now is the connection's clock: monotonic nanoseconds since it started.
func (c *conn) now() int64 { return int64(time.Since(c.start)) }

// waitForWindow notes that st's writer waits for window from now on, once
// per wait, and makes sure the stall check will look at it; callers hold
// c.mu.
func (c *conn) waitForWindow(st *stream) {
	if st.waitingSince != 0 {
		return
	}
	now := c.now()
	st.waitingSince = now
	c.armStall(now + int64(c.sendTimeout))
}

// armStall makes the stall check run by at (the connection's clock) at
// the latest; callers hold c.mu.
func (c *conn) armStall(at int64) {
	if c.closed || (c.stallAt != 0 && c.stallAt <= at) {
		return
	}
	c.stallAt = at
	d := time.Duration(at - c.now())
	if c.stallTimer == nil {
		c.stallTimer = time.AfterFunc(d, c.checkStall)
		return
	}
	c.stallTimer.Reset(d)
}

// checkStall resets the streams that waited the send timeout for window,
// or closes the connection when all of its streams wait and the client is
// silent; it looks again when the next waiting stream's time is up.
func (c *conn) checkStall() {
	timeout := int64(c.sendTimeout)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	now := c.now()
	c.stallAt = 0
	var expired []*stream
	waiting, next := 0, int64(0)
	for _, st := range c.streams {
		if st.reset || st.waitingSince == 0 {
			continue
		}
		waiting++
		if now-st.waitingSince >= timeout {
			expired = append(expired, st)
		} else if at := st.waitingSince + timeout; next == 0 || at < next {
			next = at
		}
	}
	if len(expired) > 0 && waiting == c.active && now-c.lastRead.Load() >= timeout/2 {
		c.mu.Unlock()
		c.closeStalled()
		return
	}
	for _, st := range expired {
		st.resetLocked(errSendTimeout)
	}
	if next != 0 {
		c.armStall(next)
	}
	c.mu.Unlock()
	for _, st := range expired {
		c.write(func() error {
			if st.wclosed {
				return nil
			}
			st.wclosed = true
			return c.fr.WriteRSTStream(st.id, http2.ErrCodeCancel)
		})
	}
}

// closeStalled ends a connection whose client takes nothing: GOAWAY
// ENHANCE_YOUR_CALM, then its reader wakes and closes it (serve,
// closeAfterFlush); the handlers find their writes failing.
func (c *conn) closeStalled() {
	c.mu.Lock()
	if !c.goingAway {
		c.lastServed = c.maxClientID
	}
	c.goingAway, c.finishing = true, true
	last := c.lastServed
	c.mu.Unlock()
	detail := fmt.Appendf(nil, "every stream waited %v for flow-control window", c.sendTimeout)
	c.write(func() error { return c.fr.WriteGoAway(last, http2.ErrCodeEnhanceYourCalm, detail) })
	_ = c.nc.SetReadDeadline(time.Now())
}

// armWrite bounds the write about to be made by the send timeout;
// callers hold c.wmu.
func (c *conn) armWrite() {
	now := time.Now()
	d := c.sendTimeout
	if c.wdeadline.Sub(now) > d-d/8 {
		return
	}
	c.wdeadline = now.Add(d)
	_ = c.nc.SetWriteDeadline(c.wdeadline)
}
