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
