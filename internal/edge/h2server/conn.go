package h2server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// conn is one client connection. Its goroutine (serve) reads frames and
// is the only one that adds streams; handlers write their streams' frames
// themselves.
type conn struct {
	srv        *Server
	nc         net.Conn
	fr         *http2.Framer
	tls        *tls.ConnectionState
	remoteAddr string
	ctx        context.Context
	cancel     context.CancelFunc
	// start is the origin of the connection's clock (now, stall.go);
	// sendTimeout the server's.
	start       time.Time
	sendTimeout time.Duration

	// peerMaxFrame is the largest frame the client takes.
	peerMaxFrame atomic.Uint32
	// lastRead is when the last frame was read (the connection's clock).
	lastRead atomic.Int64

	// wmu serializes frame writes and guards the HPACK encoder, whose
	// table must see header blocks in the order they are sent.
	wmu  sync.Mutex
	henc *hpack.Encoder
	hbuf bytes.Buffer
	// werr is the first write error; every later write fails with it.
	werr error
	// wdeadline is the socket's write deadline (armWrite).
	wdeadline time.Time

	// mu guards the rest, and every stream's state and body.
	mu sync.Mutex
	// window is signalled when send window grows, a stream is reset or
	// the connection ends.
	window  sync.Cond
	streams map[uint32]*stream
	// active counts the streams the client sees open (not reset).
	active int
	// maxClientID is the highest stream the client opened.
	maxClientID uint32
	// sendWindow is the connection's send window.
	sendWindow int64
	// peerInitialWindow is the client's SETTINGS_INITIAL_WINDOW_SIZE.
	peerInitialWindow int64
	// recvAvail is what the client may still send on the connection;
	// recvUnacked what handlers read and no WINDOW_UPDATE returned yet.
	recvAvail, recvUnacked int32
	// goingAway: a GOAWAY was sent, naming lastServed the last stream
	// served; peerGoingAway: one was received.
	goingAway, peerGoingAway bool
	lastServed               uint32
	// settingsSent: the server's preface went out, so a GOAWAY may.
	settingsSent bool
	// finishing: the connection went away and has no stream left.
	finishing bool
	closed    bool
	idle      *time.Timer
	// stallTimer runs the stall check at stallAt (the connection's
	// clock; 0 when not armed) while streams wait for window.
	stallTimer *time.Timer
	stallAt    int64
}

func (s *Server) newConn(ctx context.Context, nc net.Conn, st *tls.ConnectionState) *conn {
	c := &conn{srv: s, nc: nc, tls: st, streams: map[uint32]*stream{}, start: time.Now(), sendTimeout: s.sendTimeout(),
		sendWindow: 65535, peerInitialWindow: 65535, recvAvail: 65535}
	c.ctx, c.cancel = context.WithCancel(context.WithValue(ctx, http.LocalAddrContextKey, nc.LocalAddr()))
	c.window.L = &c.mu
	if a := nc.RemoteAddr(); a != nil {
		c.remoteAddr = a.String()
	}
	c.fr = http2.NewFramer(nc, bufio.NewReaderSize(nc, 16<<10))
	c.fr.SetMaxReadFrameSize(maxReadFrameSize)
	c.fr.MaxHeaderListSize = s.maxHeaderBytes()
	c.fr.ReadMetaHeaders = hpack.NewDecoder(initialHeaderTable, nil)
	c.fr.SetReuseFrames()
	c.peerMaxFrame.Store(16 << 10)
	c.henc = hpack.NewEncoder(&c.hbuf)
	return c
}

// serve reads and handles the client's frames until the connection ends.
func (c *conn) serve() {
	defer c.close()
	if d := c.srv.ReadHeaderTimeout; d > 0 {
		_ = c.nc.SetReadDeadline(time.Now().Add(d))
	}
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c.nc, preface); err != nil || string(preface) != http2.ClientPreface {
		c.mu.Lock()
		c.settingsSent = true
		c.mu.Unlock()
		c.goAway(http2.ErrCodeProtocol, []byte("invalid connection preface"))
		return
	}
	c.write(func() error {
		err := c.fr.WriteSettings(
			http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.srv.maxStreams()},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamWindow},
			http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.srv.maxHeaderBytes()},
		)
		if err == nil {
			err = c.fr.WriteWindowUpdate(0, connWindow-65535)
		}
		return err
	})
	c.mu.Lock()
	c.recvAvail = connWindow
	c.settingsSent = true
	early := c.goingAway
	c.startIdle()
	c.mu.Unlock()
	if early {
		// Shutdown came during the preface: its GOAWAY waited for our
		// SETTINGS, which a connection must start with.
		c.write(func() error { return c.fr.WriteGoAway(0, http2.ErrCodeNo, nil) })
		c.closeIfDone()
	}
	first := true
	for {
		f, err := c.fr.ReadFrame()
		if err == nil {
			c.lastRead.Store(c.now())
			if first {
				if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
					c.goAway(http2.ErrCodeProtocol, []byte("the connection must start with SETTINGS"))
					return
				}
				first = false
				c.mu.Lock()
				if !c.finishing {
					// Else closeIfDone's deadline stands.
					_ = c.nc.SetReadDeadline(time.Time{})
				}
				c.mu.Unlock()
			}
			err = c.process(f)
		}
		if err == nil {
			continue
		}
		var se http2.StreamError
		var ce http2.ConnectionError
		switch {
		case errors.As(err, &se):
			c.resetStream(se.StreamID, se.Code)
		case errors.As(err, &ce):
			var detail []byte
			if d := c.fr.ErrorDetail(); d != nil {
				detail = []byte(d.Error())
			}
			c.goAway(http2.ErrCode(ce), detail)
			return
		case errors.Is(err, http2.ErrFrameTooLarge):
			c.goAway(http2.ErrCodeFrameSize, nil)
			return
		default:
			c.mu.Lock()
			finishing := c.finishing
			c.mu.Unlock()
			if finishing {
				c.closeAfterFlush()
			}
			// Else the client went away, or Shutdown's time ran out.
			return
		}
	}
}

// process handles one frame; a StreamError resets that stream, a
// ConnectionError ends the connection.
func (c *conn) process(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		// Applied and acknowledged under the write lock: a handler that
		// the new window lets write sends its frames after the ack.
		c.wmu.Lock()
		defer c.wmu.Unlock()
		if err := f.ForeachSetting(c.setting); err != nil {
			return err
		}
		if c.werr == nil {
			c.armWrite()
			if err := c.fr.WriteSettingsAck(); err != nil {
				c.werr = err
				_ = c.nc.Close()
			}
		}
	case *http2.PingFrame:
		if !f.IsAck() {
			data := f.Data
			c.write(func() error { return c.fr.WritePing(true, data) })
		}
	case *http2.WindowUpdateFrame:
		return c.windowUpdate(f)
	case *http2.MetaHeadersFrame:
		return c.headers(f)
	case *http2.DataFrame:
		return c.data(f)
	case *http2.RSTStreamFrame:
		return c.peerReset(f)
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeProtocol}
		}
	case *http2.GoAwayFrame:
		c.mu.Lock()
		c.peerGoingAway = true
		c.mu.Unlock()
		c.closeIfDone()
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	// Unknown frame types are ignored (RFC 9113, section 5.5).
	return nil
}

// setting applies one of the client's settings; callers hold c.wmu.
func (c *conn) setting(s http2.Setting) error {
	if err := s.Valid(); err != nil {
		return err
	}
	switch s.ID {
	case http2.SettingHeaderTableSize:
		c.henc.SetMaxDynamicTableSizeLimit(s.Val)
	case http2.SettingMaxFrameSize:
		c.peerMaxFrame.Store(s.Val)
	case http2.SettingInitialWindowSize:
		c.mu.Lock()
		defer c.mu.Unlock()
		delta := int64(s.Val) - c.peerInitialWindow
		c.peerInitialWindow = int64(s.Val)
		for _, st := range c.streams {
			st.sendWindow += delta
			if st.sendWindow > 1<<31-1 {
				return http2.ConnectionError(http2.ErrCodeFlowControl)
			}
		}
		c.window.Broadcast()
	}
	return nil
}

func (c *conn) windowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.StreamID == 0 {
		if f.Increment == 0 {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		c.sendWindow += int64(f.Increment)
		if c.sendWindow > 1<<31-1 {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		c.window.Broadcast()
		return nil
	}
	st := c.streams[f.StreamID]
	if st == nil {
		if c.idleID(f.StreamID) {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return nil // a closed stream's: allowed, and ignored
	}
	if f.Increment == 0 {
		return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeProtocol}
	}
	if st.reset {
		return nil
	}
	st.sendWindow += int64(f.Increment)
	if st.sendWindow > 1<<31-1 {
		return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeFlowControl}
	}
	c.window.Broadcast()
	return nil
}

// idleID reports whether a stream of that ID was never opened; callers
// hold c.mu. The server opens none (no push).
func (c *conn) idleID(id uint32) bool {
	return id%2 == 0 || id > c.maxClientID
}

func (c *conn) peerReset(f *http2.RSTStreamFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.streams[f.StreamID]
	if st == nil {
		if c.idleID(f.StreamID) {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return nil
	}
	st.resetLocked(fmt.Errorf("h2server: the client reset the stream (%v)", f.ErrCode))
	st.peerReset = true
	c.mu.Unlock()
	// Whatever the handler writes now is not sent.
	c.wmu.Lock()
	st.wclosed = true
	c.wmu.Unlock()
	c.mu.Lock()
	return nil
}

// resetStream sends RST_STREAM for a stream error and ends the stream's
// request; its handler finds its writes failing.
func (c *conn) resetStream(id uint32, code http2.ErrCode) {
	c.mu.Lock()
	st := c.streams[id]
	if st != nil {
		st.resetLocked(fmt.Errorf("h2server: stream reset (%v)", code))
	}
	if id > c.maxClientID && id%2 == 1 {
		// A stream refused before it opened still used its ID.
		c.maxClientID = id
	}
	c.mu.Unlock()
	c.write(func() error {
		if st != nil {
			st.wclosed = true
		}
		return c.fr.WriteRSTStream(id, code)
	})
}

// data receives a DATA frame: flow control first (the connection's window
// counts every frame, also one for a stream that is gone), then the
// stream's body.
func (c *conn) data(f *http2.DataFrame) error {
	id := f.StreamID
	n := int32(f.Length)
	c.mu.Lock()
	st := c.streams[id]
	if st == nil && c.idleID(id) {
		c.mu.Unlock()
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if n > c.recvAvail {
		c.mu.Unlock()
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	c.recvAvail -= n
	if st == nil && c.goingAway && id > c.lastServed {
		// A stream the GOAWAY ignored: its data counts against the
		// connection's window only (RFC 9113, section 6.8).
		inc := c.creditLocked(nil, n)
		c.mu.Unlock()
		c.sendCredit(id, inc)
		return nil
	}
	if st == nil || st.remoteClosed || st.reset || st.body == nil || st.body.closed {
		// Nobody reads it: the connection's window is returned at once.
		inc := c.creditLocked(nil, n)
		var err error
		switch {
		case st == nil || st.remoteClosed || st.peerReset:
			err = http2.StreamError{StreamID: id, Code: http2.ErrCodeStreamClosed}
		case st.body == nil || st.body.closed:
			st.body.received(len(f.Data()))
			if f.StreamEnded() {
				st.remoteEnded()
			}
		}
		c.mu.Unlock()
		c.sendCredit(id, inc)
		return err
	}
	if n > st.recvAvail {
		inc := c.creditLocked(nil, n)
		c.mu.Unlock()
		c.sendCredit(id, inc)
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeFlowControl}
	}
	st.recvAvail -= n
	data := f.Data()
	var inc credit
	if pad := n - int32(len(data)); pad > 0 {
		inc = c.creditLocked(st, pad)
	}
	b := st.body
	b.buf = append(b.buf, data...)
	b.received(len(data))
	var err error
	if b.declared >= 0 && b.got > b.declared {
		err = http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	} else if f.StreamEnded() {
		if b.declared >= 0 && b.got != b.declared {
			err = http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
		} else {
			st.remoteEnded()
		}
	}
	b.cond.Broadcast()
	c.mu.Unlock()
	c.sendCredit(id, inc)
	return err
}

// credit is the WINDOW_UPDATE increments to send.
type credit struct{ conn, stream uint32 }

// creditLocked returns n bytes of window to the client: the connection's,
// and st's when st still takes data; sent once a quarter of the window
// gathered, so that a stream of small frames is not answered frame by
// frame. Callers hold c.mu and send the result with sendCredit.
func (c *conn) creditLocked(st *stream, n int32) credit {
	var inc credit
	c.recvUnacked += n
	if c.recvUnacked >= connWindow/4 {
		inc.conn = uint32(c.recvUnacked)
		c.recvAvail += c.recvUnacked
		c.recvUnacked = 0
	}
	if st != nil && !st.remoteClosed && !st.reset {
		st.recvUnacked += n
		if st.recvUnacked >= streamWindow/4 {
			inc.stream = uint32(st.recvUnacked)
			st.recvAvail += st.recvUnacked
			st.recvUnacked = 0
		}
	}
	return inc
}

func (c *conn) sendCredit(id uint32, inc credit) {
	if inc.conn == 0 && inc.stream == 0 {
		return
	}
	c.write(func() error {
		if inc.conn > 0 {
			if err := c.fr.WriteWindowUpdate(0, inc.conn); err != nil {
				return err
			}
		}
		if inc.stream > 0 {
			return c.fr.WriteWindowUpdate(id, inc.stream)
		}
		return nil
	})
}

// write runs fn, which writes frames, under the write lock, unless an
// earlier write failed. fn returns errStreamClosed, without writing, for
// a stream that ended; any other error is the connection's.
func (c *conn) write(fn func() error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return c.werr
	}
	c.armWrite()
	if err := fn(); err != nil {
		if err == errStreamClosed {
			return err
		}
		c.werr = err
		// The reader ends with the connection.
		_ = c.nc.Close()
		return err
	}
	return nil
}

// goAway tells the client the last stream that is served; with an error
// code, the connection then ends.
func (c *conn) goAway(code http2.ErrCode, detail []byte) {
	c.mu.Lock()
	already := c.goingAway
	if !already {
		c.lastServed = c.maxClientID
	}
	last := c.lastServed
	c.goingAway = true
	ready := c.settingsSent
	c.mu.Unlock()
	if !ready {
		// serve sends it after the SETTINGS it is writing.
		return
	}
	if !already || code != http2.ErrCodeNo {
		c.write(func() error { return c.fr.WriteGoAway(last, code, detail) })
	}
	if code != http2.ErrCodeNo {
		c.closeAfterFlush()
		return
	}
	c.closeIfDone()
}

// closeAfterFlush closes the connection after a connection error, once
// what was written reached the client (a coalescing connection sends its
// pending bytes on Close). What the client still sends is read for a
// moment first: closing a socket with unread bytes resets the connection,
// and the client might lose the GOAWAY that says why.
func (c *conn) closeAfterFlush() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(lingerTimeout))
	_, _ = io.CopyN(io.Discard, c.nc, lingerBytes)
	_ = c.nc.Close()
}

// The most a connection that ends in error is read before it is closed.
const (
	lingerTimeout = 500 * time.Millisecond
	lingerBytes   = 256 << 10
)

// closeIfDone ends a connection that is going away once no stream is
// left: its reader wakes and closes it (closeAfterFlush).
func (c *conn) closeIfDone() {
	c.mu.Lock()
	done := (c.goingAway || c.peerGoingAway) && len(c.streams) == 0
	c.finishing = c.finishing || done
	c.mu.Unlock()
	if done {
		_ = c.nc.SetReadDeadline(time.Now())
	}
}

// startIdle starts the idle timeout of a connection without streams;
// callers hold c.mu.
func (c *conn) startIdle() {
	d := c.srv.IdleTimeout
	if d <= 0 || c.closed {
		return
	}
	if c.idle == nil {
		c.idle = time.AfterFunc(d, c.idleFired)
		return
	}
	c.idle.Reset(d)
}

func (c *conn) idleFired() {
	c.mu.Lock()
	idle := len(c.streams) == 0
	c.mu.Unlock()
	if idle {
		c.goAway(http2.ErrCodeNo, nil)
	}
}

// close ends the connection: streams' handlers see their requests
// canceled and writes failing.
func (c *conn) close() {
	c.mu.Lock()
	c.closed = true
	if c.idle != nil {
		c.idle.Stop()
	}
	if c.stallTimer != nil {
		c.stallTimer.Stop()
	}
	for _, st := range c.streams {
		st.resetLocked(errConnClosed)
	}
	c.window.Broadcast()
	c.mu.Unlock()
	c.cancel()
	_ = c.nc.Close()
}
