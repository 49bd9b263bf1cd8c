package proxy

import (
	"net"
	"sync"
)

// batchConn coalesces writes (experiment).
type batchConn struct {
	net.Conn
	mu      sync.Mutex
	cond    sync.Cond
	buf     []byte
	spare   []byte
	err     error
	writing bool
}

func newBatchConn(c net.Conn) *batchConn {
	b := &batchConn{Conn: c}
	b.cond.L = &b.mu
	return b
}

const batchLimit = 64 << 10

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.err == nil && b.writing && len(b.buf)+len(p) > batchLimit && len(b.buf) > 0 {
		b.cond.Wait()
	}
	if b.err != nil {
		return 0, b.err
	}
	b.buf = append(b.buf, p...)
	if !b.writing {
		b.writing = true
		go b.flush()
	}
	return len(p), nil
}

func (b *batchConn) flush() {
	b.mu.Lock()
	for len(b.buf) > 0 && b.err == nil {
		out := b.buf
		b.buf = b.spare[:0]
		b.mu.Unlock()
		_, err := b.Conn.Write(out)
		b.mu.Lock()
		b.spare = out[:0]
		if err != nil {
			b.err = err
		}
		b.cond.Broadcast()
	}
	b.writing = false
	b.cond.Broadcast()
	b.mu.Unlock()
}

func (b *batchConn) Close() error {
	b.mu.Lock()
	for b.writing && b.err == nil {
		b.cond.Wait()
	}
	b.mu.Unlock()
	return b.Conn.Close()
}
