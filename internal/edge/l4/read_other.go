//go:build !unix

package l4

import (
	"errors"
	"io"
	"net"
	"sync"
)

// reader reads a socket into pooled buffers; here a buffer is held while
// a read waits.
type reader struct{ conn net.Conn }

func newReader(c net.Conn) (reader, error) { return reader{conn: c}, nil }

// read reads into a buffer of pool, which the caller puts back. n == 0
// with a nil error is the end of a TCP stream, or an empty UDP datagram;
// the buffer is then nil.
func (r reader) read(pool *sync.Pool) (*[]byte, int, error) {
	buf := pool.Get().(*[]byte)
	n, err := r.conn.Read(*buf)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	if err != nil || n <= 0 {
		pool.Put(buf)
		return nil, 0, err
	}
	return buf, n, nil
}
