package proxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// writeCountingConn counts the writes that reach the connection.
type writeCountingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *writeCountingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// coalescedPipe returns a coalescedConn over one end of a synchronous pipe (a
// write waits until the other end reads it) and the other end.
func coalescedPipe(t *testing.T) (*coalescedConn, *writeCountingConn, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	under := &writeCountingConn{Conn: a}
	return newCoalescedConn(under), under, b
}

// Writes from many goroutines while the peer is not reading go out in
// two writes (the first, and everything gathered while it waited), each
// goroutine's bytes in its order; then the connection holds no buffer.
func TestCoalescedConnGathersWrites(t *testing.T) {
	c, under, peer := coalescedPipe(t)
	const writers, records = 8, 100
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range records {
				if _, err := fmt.Fprintf(c, "%d:%03d;", w, i); err != nil {
					t.Errorf("write: %v", err)
					return
				}
			}
		})
	}
	wg.Wait() // every Write returned before the peer read a byte
	want := writers * records * len("0:000;")
	got := make([]byte, want)
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Fatalf("reading %d bytes: %v", want, err)
	}
	next := make([]int, writers)
	for _, rec := range bytes.Split(bytes.TrimSuffix(got, []byte(";")), []byte(";")) {
		var w, i int
		if _, err := fmt.Sscanf(string(rec), "%d:%d", &w, &i); err != nil || w >= writers || i != next[w] {
			t.Fatalf("record %q out of order (writer %d expected %d next)", rec, w, next[min(w, writers-1)])
		}
		next[w]++
	}
	if n := under.writes.Load(); n > 2 {
		t.Errorf("%d writes of %d reached the connection, want at most 2", n, writers*records)
	}
	waitFor(t, "the flusher to end", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.flushing
	})
	if c.pending != nil {
		t.Errorf("an idle connection holds a buffer of %d bytes", cap(*c.pending))
	}
}

// A peer that does not read holds Write once coalescedLimit bytes wait.
func TestCoalescedConnBackpressure(t *testing.T) {
	c, _, peer := coalescedPipe(t)
	chunk := bytes.Repeat([]byte("x"), 48<<10)
	returned := make(chan int, 4)
	go func() {
		for i := range 4 {
			if _, err := c.Write(chunk); err != nil {
				t.Errorf("write %d: %v", i, err)
			}
			returned <- i
		}
	}()
	// The first is with the flusher, blocked on the peer; the second
	// waits in the buffer; the third does not fit beside it.
	for want := range 2 {
		if got := <-returned; got != want {
			t.Fatalf("write %d returned, want %d", got, want)
		}
	}
	select {
	case i := <-returned:
		t.Fatalf("write %d returned with %d bytes waiting for a peer that does not read", i, 2*len(chunk))
	case <-time.After(100 * time.Millisecond):
	}
	got, err := io.ReadAll(io.LimitReader(peer, int64(4*len(chunk))))
	if err != nil || len(got) != 4*len(chunk) {
		t.Fatalf("read %d bytes (%v), want %d", len(got), err, 4*len(chunk))
	}
	for range 2 {
		<-returned
	}
}

// Close sends what is pending first; a write after a failed one fails.
func TestCoalescedConnCloseAndErrors(t *testing.T) {
	t.Run("close sends what is pending", func(t *testing.T) {
		c, _, peer := coalescedPipe(t)
		if _, err := io.WriteString(c, "GOAWAY"); err != nil {
			t.Fatal(err)
		}
		read := make(chan string)
		go func() {
			b, _ := io.ReadAll(peer)
			read <- string(b)
		}()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if got := <-read; got != "GOAWAY" {
			t.Errorf("the peer read %q before the end, want %q", got, "GOAWAY")
		}
		if _, err := c.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
			t.Errorf("a write after Close: %v, want %v", err, net.ErrClosed)
		}
	})
	t.Run("a failed write fails the next ones", func(t *testing.T) {
		c, _, peer := coalescedPipe(t)
		peer.Close()
		if _, err := c.Write([]byte("lost")); err != nil {
			t.Fatalf("the first write is gathered, not written: %v", err)
		}
		var err error
		waitFor(t, "a write to fail", func() bool {
			_, err = c.Write([]byte("next"))
			return err != nil
		})
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("the next write failed with %v, want the flusher's %v", err, io.ErrClosedPipe)
		}
	})
	t.Run("close does not wait on a peer that does not read", func(t *testing.T) {
		wait := closeFlushWait
		closeFlushWait = 100 * time.Millisecond
		t.Cleanup(func() { closeFlushWait = wait })
		c, _, _ := coalescedPipe(t) // the peer never reads: the pipe's write waits until its deadline
		if _, err := c.Write([]byte("stuck")); err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- c.Close() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Close: %v", err)
			}
		case <-time.After(closeFlushWait + 5*time.Second):
			t.Fatalf("Close still waits %s after it was called", closeFlushWait+5*time.Second)
		}
	})
}

func TestH2CipherAdequate(t *testing.T) {
	for _, tc := range []struct {
		version uint16
		suite   uint16
		want    bool
	}{
		{tls.VersionTLS13, tls.TLS_AES_128_GCM_SHA256, true},
		{tls.VersionTLS12, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, true},
		{tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, true},
		{tls.VersionTLS12, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, false},
		{tls.VersionTLS12, tls.TLS_RSA_WITH_AES_128_GCM_SHA256, false},
		{tls.VersionTLS11, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, false},
	} {
		st := tls.ConnectionState{Version: tc.version, CipherSuite: tc.suite}
		if got := h2CipherAdequate(st); got != tc.want {
			t.Errorf("%s %s: adequate %v, want %v", tls.VersionName(tc.version), tls.CipherSuiteName(tc.suite), got, tc.want)
		}
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
