package holdconn_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/edge/holdconn"
)

// pair is a held connection and the peer it is connected to.
func pair(t *testing.T) (*holdconn.Conn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	hc, err := holdconn.New(c.(*net.TCPConn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hc.Close(); _ = peer.Close() })
	return hc, peer.(*net.TCPConn)
}

// received reads what the peer has been sent within d.
func received(t *testing.T, peer net.Conn, d time.Duration) []byte {
	t.Helper()
	_ = peer.SetReadDeadline(time.Now().Add(d))
	var got []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := peer.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("peer read: %v", err)
			}
			return got
		}
	}
}

// echo makes the peer answer each 4 bytes it reads with them in upper
// case, after delay, until the connection ends.
func echo(peer net.Conn, delay time.Duration) {
	go func() {
		buf := make([]byte, 4)
		for {
			if _, err := io.ReadFull(peer, buf); err != nil {
				return
			}
			time.Sleep(delay)
			_, _ = peer.Write(bytes.ToUpper(buf))
		}
	}()
}

// answer makes the peer read want bytes and then write reply.
func answer(t *testing.T, peer net.Conn, want int, reply string) <-chan []byte {
	t.Helper()
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, want)
		_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, _ := io.ReadFull(peer, buf)
		_, _ = peer.Write([]byte(reply))
		got <- buf[:n]
	}()
	return got
}

func TestHeldWriteIsSentByTheRead(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		hold   int // index of the write Hold comes before; -1 for none
		// heldBeforeRead is what the peer sees before the Read.
		heldBeforeRead string
	}{
		{name: "one write held", writes: []string{"GET / HTTP/1.1\r\n\r\n"}, hold: 0},
		{name: "no hold", writes: []string{"GET / HTTP/1.1\r\n\r\n"}, hold: -1, heldBeforeRead: "GET / HTTP/1.1\r\n\r\n"},
		{name: "a write before the held one sends it at once", writes: []string{"POST / HTTP/1.1\r\n", "body"}, hold: 1, heldBeforeRead: "POST / HTTP/1.1\r\nbody"},
		{name: "a write after the held one sends both", writes: []string{"GET / HTTP/1.1\r\n", "\r\n"}, hold: 0, heldBeforeRead: "GET / HTTP/1.1\r\n\r\n"},
		{name: "too large to hold", writes: []string{string(bytes.Repeat([]byte("x"), holdconn.MaxHeld+1))}, hold: 0, heldBeforeRead: string(bytes.Repeat([]byte("x"), holdconn.MaxHeld+1))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hc, peer := pair(t)
			all := ""
			for i, w := range tt.writes {
				if i == tt.hold {
					hc.Hold()
				}
				if n, err := hc.Write([]byte(w)); err != nil || n != len(w) {
					t.Fatalf("write %d: %d, %v", i, n, err)
				}
				all += w
			}
			if got := received(t, peer, 100*time.Millisecond); string(got) != tt.heldBeforeRead {
				t.Fatalf("the peer got %d bytes before the read, want %d", len(got), len(tt.heldBeforeRead))
			}
			got := answer(t, peer, len(all)-len(tt.heldBeforeRead), "HTTP/1.1 200 OK\r\n\r\n")
			buf := make([]byte, 100)
			_ = hc.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := hc.Read(buf)
			if err != nil || string(buf[:n]) != "HTTP/1.1 200 OK\r\n\r\n" {
				t.Fatalf("read %q, %v", buf[:n], err)
			}
			if sent := string(<-got); tt.heldBeforeRead+sent != all {
				t.Fatalf("the peer got %q after the read, want the rest of %q", sent, all)
			}
			if hc.Held() != 0 {
				t.Fatalf("%d bytes still held", hc.Held())
			}
		})
	}
}

// An exchange after exchange on one connection: each held request is
// answered, and a read with nothing held reads as usual.
func TestExchanges(t *testing.T) {
	hc, peer := pair(t)
	echo(peer, 0)
	buf := make([]byte, 4)
	for i := range 200 {
		hc.Hold()
		req := []byte{'a' + byte(i%26), 'b', 'c', 'd'}
		if _, err := hc.Write(req); err != nil {
			t.Fatal(err)
		}
		_ = hc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(hc, buf); err != nil {
			t.Fatalf("exchange %d: %v", i, err)
		}
		if !bytes.Equal(buf, bytes.ToUpper(req)) {
			t.Fatalf("exchange %d: %q", i, buf)
		}
	}
}

// A held write the socket cannot take at once (its send buffer is full)
// is finished by a blocking write; the answer is still read.
func TestHeldWriteToAFullSocket(t *testing.T) {
	hc, peer := pair(t)
	// Fill the send buffer, of a fixed size: the peer reads nothing yet.
	if err := hc.SetWriteBuffer(16 << 10); err != nil {
		t.Fatal(err)
	}
	_ = hc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	filled, err := hc.Write(make([]byte, 64<<20))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("filling the send buffer: %d bytes, %v", filled, err)
	}
	_ = hc.SetWriteDeadline(time.Time{})
	// A read between, so that the next write may be held.
	if _, err := peer.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(hc, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	req := []byte("GET / HTTP/1.1\r\n\r\n")
	hc.Hold()
	if _, err := hc.Write(req); err != nil {
		t.Fatal(err)
	}
	if hc.Held() != len(req) {
		t.Fatalf("held %d bytes, want %d", hc.Held(), len(req))
	}
	got := answer(t, peer, filled+len(req), "ok")
	buf := make([]byte, 2)
	_ = hc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(hc, buf); err != nil || string(buf) != "ok" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if sent := <-got; !bytes.Equal(sent[filled:], req) {
		t.Fatalf("the peer got %q after the filler, want the held request", sent[filled:])
	}
}

func TestReadErrors(t *testing.T) {
	t.Run("deadline while waiting", func(t *testing.T) {
		hc, peer := pair(t)
		hc.Hold()
		_, _ = hc.Write([]byte("ping"))
		_ = hc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := hc.Read(make([]byte, 10))
		var ne net.Error
		if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("got %v, want a timeout", err)
		}
		if got := received(t, peer, 100*time.Millisecond); string(got) != "ping" {
			t.Fatalf("the peer got %q, want the held write before the timeout", got)
		}
	})
	t.Run("deadline moved to the past by another goroutine", func(t *testing.T) {
		hc, _ := pair(t)
		hc.Hold()
		_, _ = hc.Write([]byte("ping"))
		_ = hc.SetReadDeadline(time.Now().Add(10 * time.Second))
		stop := time.AfterFunc(10*time.Millisecond, func() { _ = hc.SetDeadline(time.Unix(1, 0)) })
		t.Cleanup(func() { stop.Stop() })
		if _, err := hc.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("got %v, want a timeout", err)
		}
	})
	t.Run("deadline after the guard", func(t *testing.T) {
		// The guard gives way to the caller's deadline, which still
		// ends the read.
		hc, _ := pair(t)
		hc.Hold()
		_, _ = hc.Write([]byte("ping"))
		_ = hc.SetReadDeadline(time.Now().Add(holdconn.Guard + 200*time.Millisecond))
		if _, err := hc.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("got %v, want a timeout", err)
		}
	})
	t.Run("peer half-closed before the request", func(t *testing.T) {
		// A lingering close: the peer's FIN came before the wait began
		// (and is forgotten by it), the peer reads on and never
		// answers. The guard ends the wait and the read sees the end,
		// long before the caller's deadline.
		hc, peer := pair(t)
		_ = peer.CloseWrite()
		go func() { _, _ = io.Copy(io.Discard, peer) }()
		time.Sleep(20 * time.Millisecond) // the FIN reaches hc's socket
		hc.Hold()
		_, _ = hc.Write([]byte("ping"))
		_ = hc.SetReadDeadline(time.Now().Add(time.Minute))
		if _, err := hc.Read(make([]byte, 10)); err != io.EOF {
			t.Fatalf("got %v, want EOF", err)
		}
	})
	t.Run("peer closes after the request", func(t *testing.T) {
		hc, peer := pair(t)
		go func() {
			buf := make([]byte, 4)
			_, _ = io.ReadFull(peer, buf)
			_ = peer.Close()
		}()
		hc.Hold()
		_, _ = hc.Write([]byte("ping"))
		_ = hc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := hc.Read(make([]byte, 10)); err != io.EOF {
			t.Fatalf("got %v, want EOF", err)
		}
	})
	for _, reset := range []bool{true, false} {
		// An idle pooled connection the endpoint closed, with a reset or
		// a FIN: the request is refused with a reset, which wakes the
		// wait even though the close was noticed before it began.
		t.Run(fmt.Sprintf("peer closed before the request, reset %v", reset), func(t *testing.T) {
			hc, peer := pair(t)
			if reset {
				_ = peer.SetLinger(0)
			}
			_ = peer.Close()
			// Time for the poller to note the close, which the read
			// then forgets (the case the held write is sent for).
			time.Sleep(20 * time.Millisecond)
			hc.Hold()
			_, _ = hc.Write([]byte("ping"))
			_ = hc.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err := hc.Read(make([]byte, 10))
			if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("got %v, want the end of the connection", err)
			}
		})
	}
}

// An answer slower than the guard is read as usual, under the caller's
// deadline, which the guard left as it was.
func TestAnswerSlowerThanTheGuard(t *testing.T) {
	hc, peer := pair(t)
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, 4)
		_, _ = io.ReadFull(peer, buf)
		time.Sleep(holdconn.Guard + 100*time.Millisecond)
		_, _ = peer.Write([]byte("pong"))
		got <- buf
	}()
	hc.Hold()
	_, _ = hc.Write([]byte("ping"))
	_ = hc.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(hc, buf); err != nil || string(buf) != "pong" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if string(<-got) != "ping" {
		t.Fatal("the peer did not get the request")
	}
}

// io.Copy's paths (bufio's ReadFrom and WriteTo) send the held bytes
// first.
func TestCopiesSendHeldBytesFirst(t *testing.T) {
	t.Run("ReadFrom", func(t *testing.T) {
		hc, peer := pair(t)
		hc.Hold()
		_, _ = hc.Write([]byte("HEAD"))
		// A reader without WriteTo, so that io.Copy takes hc.ReadFrom.
		if _, err := io.Copy(hc, struct{ io.Reader }{strings.NewReader("BODY")}); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 8)
		_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(peer, buf); err != nil || string(buf) != "HEADBODY" {
			t.Fatalf("the peer got %q, %v; want HEADBODY", buf, err)
		}
	})
	t.Run("WriteTo", func(t *testing.T) {
		hc, peer := pair(t)
		go func() {
			buf := make([]byte, 4)
			_, _ = io.ReadFull(peer, buf)
			_, _ = peer.Write(bytes.ToUpper(buf))
			_ = peer.Close()
		}()
		hc.Hold()
		_, _ = hc.Write([]byte("ping"))
		_ = hc.SetReadDeadline(time.Now().Add(10 * time.Second))
		var out bytes.Buffer
		if _, err := io.Copy(&out, hc); err != nil || out.String() != "PING" {
			t.Fatalf("copied %q, %v; want PING", out.String(), err)
		}
	})
}

// The point of a held read: it reads once, where a read that tries
// first would read twice (EAGAIN, then the answer). The thread's read
// system calls are counted by the kernel (/proc/thread-self/io); the
// goroutine is locked to its thread meanwhile.
func TestHeldReadReadsOnce(t *testing.T) {
	if _, err := os.ReadFile("/proc/thread-self/io"); err != nil {
		t.Fatalf("counting read system calls needs /proc/thread-self/io (Linux with task I/O accounting): %v", err)
	}
	tests := []struct {
		name  string
		hold  bool
		reads int
	}{
		{name: "held", hold: true, reads: 1},
		{name: "not held", hold: false, reads: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hc, peer := pair(t)
			// The answer comes after a read that tries first would
			// have tried.
			echo(peer, 20*time.Millisecond)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			buf := make([]byte, 4)
			const exchanges = 5
			before := readCalls(t)
			overhead := readCalls(t) - before // what reading the count costs
			before = readCalls(t)
			for range exchanges {
				if tt.hold {
					hc.Hold()
				}
				_, _ = hc.Write([]byte("ping"))
				if _, err := io.ReadFull(hc, buf); err != nil || string(buf) != "PING" {
					t.Fatalf("read %q, %v", buf, err)
				}
			}
			if got := readCalls(t) - before - overhead; got != tt.reads*exchanges {
				t.Errorf("%d read system calls for %d exchanges, want %d", got, exchanges, tt.reads*exchanges)
			}
		})
	}
}

// readCalls is the calling thread's count of read system calls.
func readCalls(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/io")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no syscr in /proc/thread-self/io: %s", b)
	return 0
}
