package l4

import (
	"errors"
	"io"
	"net"
	"sync"

	"github.com/fleetnet/fleetnet/internal/eastwest/tunnel"
)

// side is one end of a forwarded TCP connection: the client's, or the
// far end, a TCP connection to an endpoint or a stream through another
// network's east-west gateway.
type side interface {
	Write(b []byte) (int, error)
	// CloseWrite passes the other end's end of stream on.
	CloseWrite() error
	Close() error
	// reset makes the next Close a reset, where the side has one.
	reset()
	// reader reads the side into pooled buffers.
	reader() (bufReader, error)
}

// bufReader reads into a buffer of pool, which the caller puts back. n ==
// 0 with a nil error is the end of the stream; the buffer is then nil.
type bufReader interface {
	read(pool *sync.Pool) (*[]byte, int, error)
}

// tcpSide is a TCP connection, read without holding a buffer while it
// waits (reader).
type tcpSide struct{ *net.TCPConn }

func (s tcpSide) reset() { _ = s.SetLinger(0) }

func (s tcpSide) reader() (bufReader, error) { return newReader(s.TCPConn) }

// streamSide is a stream through an east-west gateway. A read holds its
// buffer while it waits: streams are fewer than direct connections, and a
// stream has no socket to wait on.
type streamSide struct{ *tunnel.Stream }

func (s streamSide) reset() {}

func (s streamSide) reader() (bufReader, error) { return s, nil }

func (s streamSide) read(pool *sync.Pool) (*[]byte, int, error) {
	buf := pool.Get().(*[]byte)
	n, err := s.Read(*buf)
	if n > 0 {
		// Data with io.EOF: the end comes with the next read.
		return buf, n, nil
	}
	pool.Put(buf)
	if errors.Is(err, io.EOF) {
		return nil, 0, nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return nil, 0, err
}
