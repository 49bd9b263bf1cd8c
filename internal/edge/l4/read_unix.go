//go:build unix

package l4

import (
	"os"
	"sync"
	"syscall"
)

// reader reads a socket into pooled buffers taken only once data is
// there: a connection or flow that waits holds no buffer, so that many
// idle ones cost no memory beyond the kernel's.
type reader struct{ rc syscall.RawConn }

func newReader(c syscall.Conn) (reader, error) {
	rc, err := c.SyscallConn()
	return reader{rc: rc}, err
}

// read waits for data and reads it into a buffer of pool, which the
// caller puts back. n == 0 with a nil error is the end of a TCP stream,
// or an empty UDP datagram; the buffer is then nil.
func (r reader) read(pool *sync.Pool) (*[]byte, int, error) {
	var buf *[]byte
	var n int
	var rerr error
	err := r.rc.Read(func(fd uintptr) bool {
		if buf == nil {
			buf = pool.Get().(*[]byte)
		}
		for {
			n, rerr = syscall.Read(int(fd), *buf)
			if rerr != syscall.EINTR {
				break
			}
		}
		if rerr == syscall.EAGAIN {
			// Nothing yet: give the buffer back while waiting.
			pool.Put(buf)
			buf = nil
			return false
		}
		return true
	})
	if err == nil && rerr != nil {
		err = os.NewSyscallError("read", rerr)
	}
	if err != nil || n <= 0 {
		if buf != nil {
			pool.Put(buf)
		}
		return nil, 0, err
	}
	return buf, n, nil
}
