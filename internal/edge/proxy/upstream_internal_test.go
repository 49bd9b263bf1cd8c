package proxy

import (
	"io"
	"net"
	"testing"
	"time"
)

// retain closes the idle connections of the endpoints it drops and
// forgets their pools; an endpoint it keeps keeps its idle connections.
func TestRetain(t *testing.T) {
	serve := func() (string, chan net.Conn) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		accepted := make(chan net.Conn, 4)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				accepted <- c
			}
		}()
		return ln.Addr().String(), accepted
	}
	dropped, droppedConns := serve()
	kept, _ := serve()
	u := newUpstreams()
	t.Cleanup(u.close)
	for _, addr := range []string{dropped, kept} {
		c, _, err := u.get(addr, true, time.Second, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		u.put(c)
	}
	peer := <-droppedConns

	u.retain(map[string]struct{}{kept: {}})
	_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := peer.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the dropped endpoint read %v on its idle connection, want EOF (closed by the edge)", err)
	}
	if _, ok := u.pools.Load(dropped); ok {
		t.Errorf("the pool of %s is still in the map after retain dropped it", dropped)
	}
	if _, reused, err := u.get(kept, false, time.Second, time.Time{}); err != nil || !reused {
		t.Errorf("after retain kept %s: reused %v, err %v; want its idle connection", kept, reused, err)
	}

	// A connection in use while its endpoint is dropped is closed when
	// it is put back, not pooled anew.
	inUse, _, err := u.get(dropped, true, time.Second, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	peer = <-droppedConns
	u.retain(map[string]struct{}{kept: {}})
	u.put(inUse)
	_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := peer.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the dropped endpoint read %v on a connection put back after retain, want EOF (closed by the edge)", err)
	}
}

// A request is held until the read of its answer on a new connection or
// one idle a moment, not on one idle for long, which its endpoint may
// have half-closed meanwhile (flushRequest).
func TestHoldOnlyOnRecentConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted []net.Conn
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		for _, c := range accepted {
			_ = c.Close()
		}
	})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted = append(accepted, c)
		}
	}()
	addr := ln.Addr().String()
	u := newUpstreams()
	t.Cleanup(u.close)
	tests := []struct {
		name string
		idle time.Duration // how long the pooled connection was idle; 0: a new one
		held bool
	}{
		{name: "new connection", held: true},
		{name: "idle a moment", idle: time.Millisecond, held: true},
		{name: "idle long", idle: holdIdleMax + time.Millisecond, held: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up, _, err := u.get(addr, true, time.Second, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if tt.idle > 0 {
				u.put(up)
				v, _ := u.pools.Load(addr)
				p := v.(*upPool)
				p.mu.Lock()
				p.idle[len(p.idle)-1].since = time.Now().Add(-tt.idle)
				p.mu.Unlock()
				var reused bool
				if up, reused, err = u.get(addr, false, time.Second, time.Time{}); err != nil || !reused {
					t.Fatalf("reused %v, %v; want the pooled connection", reused, err)
				}
			}
			_, _ = up.bw.WriteString("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			if err := up.flushRequest(); err != nil {
				t.Fatal(err)
			}
			if held := up.conn.Held() > 0; held != tt.held {
				t.Errorf("request held %v, want %v", held, tt.held)
			}
			_ = up.conn.Close()
		})
	}
}
