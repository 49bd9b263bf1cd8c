package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetnet/fleetnet/internal/testkit"
)

// roleEnv makes this program one of its children: the backends, or a load
// generator. Children are separate processes so that the edge's runtime
// (and its CPU profile) holds only the edge.
const roleEnv = "FLEETNET_L4BENCH_ROLE"

// The first byte a client sends to a TCP backend says what it wants.
const (
	// modeStream: the backend writes without end, the client reads.
	modeStream = 'S'
	// modeEcho: the backend writes back what it reads, and closes after
	// the client's end of stream.
	modeEcho = 'E'
)

// serveBackends listens on n TCP and n UDP loopback ports, prints their
// addresses on one line ("tcp a b | udp c d") and serves until its
// standard input closes (the parent is gone).
func serveBackends(n int) error {
	var tcp, udp []string
	chunk := make([]byte, 64<<10)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		tcp = append(tcp, ln.Addr().String())
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go serveTCP(c, chunk)
			}
		}()
		pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return err
		}
		_ = pc.SetReadBuffer(4 << 20)
		udp = append(udp, pc.LocalAddr().String())
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, from, err := pc.ReadFromUDPAddrPort(buf)
				if err != nil {
					return
				}
				_, _ = pc.WriteToUDPAddrPort(buf[:n], from)
			}
		}()
	}
	fmt.Printf("tcp %s | udp %s\n", strings.Join(tcp, " "), strings.Join(udp, " "))
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

func serveTCP(c net.Conn, chunk []byte) {
	defer c.Close()
	var mode [1]byte
	if _, err := io.ReadFull(c, mode[:]); err != nil {
		return
	}
	switch mode[0] {
	case modeStream:
		for {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	case modeEcho:
		_, _ = io.Copy(c, c)
	}
}

// backends is the running backends' process.
type backends struct {
	*testkit.Child
	tcp, udp []string
}

func startBackends(n int) (*backends, error) {
	cmd, err := child("backends", fmt.Sprint(n))
	if err != nil {
		return nil, err
	}
	c, line, err := testkit.StartReadLine(cmd)
	if err != nil {
		return nil, fmt.Errorf("the backends did not start: %w", err)
	}
	b := &backends{Child: c}
	tcpPart, udpPart, _ := strings.Cut(strings.TrimSpace(line), " | ")
	b.tcp = strings.Fields(strings.TrimPrefix(tcpPart, "tcp"))
	b.udp = strings.Fields(strings.TrimPrefix(udpPart, "udp"))
	return b, nil
}

// stop closes the backends' input, which ends them.
func (b *backends) stop() { b.Stop(nil, 3*time.Second) }

// child returns a command that runs this program as role, with arg.
func child(role, arg string) (*exec.Cmd, error) {
	return testkit.SelfCommand(roleEnv+"="+role, argEnv+"="+arg)
}

const argEnv = "FLEETNET_L4BENCH_ARG"

// Load modes.
const (
	loadStream  = "stream"  // long connections reading what backends stream
	loadConnect = "connect" // one short exchange per connection
	loadUDP     = "udp"     // one datagram in flight per client socket
	// loadPingPong: 64-byte exchanges one after the other on long
	// connections, as fast as they go (the saturated exchange rate).
	loadPingPong = "pingpong"
	// loadLatency: the same exchanges at a fixed total Rate (open loop:
	// each timed from when it was due, so a queue behind a slow one
	// counts), for latency percentiles at a given load.
	loadLatency = "latency"
)

// load is one measurement, run by a load generator process.
type load struct {
	Mode     string        `json:"mode"`
	Addr     string        `json:"addr"`
	Conns    int           `json:"conns"`
	Warmup   time.Duration `json:"warmup"`
	Duration time.Duration `json:"duration"`
	// Rate is loadLatency's exchanges per second, over all connections.
	Rate float64 `json:"rate,omitempty"`
}

// result is what a load generator measured after its warm-up.
type result struct {
	Bytes   int64   `json:"bytes"`
	Ops     int64   `json:"ops"`
	Errors  int64   `json:"errors"`
	Seconds float64 `json:"seconds"`
	// P50 and P99 are loadLatency's percentiles, in milliseconds.
	P50 float64 `json:"p50,omitempty"`
	P99 float64 `json:"p99,omitempty"`
}

// runLoad runs l in a load generator process and returns its result.
func runLoad(l load) (result, error) {
	arg, err := json.Marshal(l)
	if err != nil {
		return result{}, err
	}
	cmd, err := child("load", string(arg))
	if err != nil {
		return result{}, err
	}
	out, err := cmd.Output()
	if err != nil {
		return result{}, fmt.Errorf("load %s on %s: %w", l.Mode, l.Addr, err)
	}
	var r result
	if err := json.Unmarshal(out, &r); err != nil {
		return result{}, fmt.Errorf("load %s on %s: %w (%q)", l.Mode, l.Addr, err, out)
	}
	return r, nil
}

// generate is the load generator process: it runs the load in arg and
// prints the result as JSON.
func generate(arg string) error {
	var l load
	if err := json.Unmarshal([]byte(arg), &l); err != nil {
		return err
	}
	var bytes, ops, errs atomic.Int64
	var counting, stop atomic.Bool
	var wg sync.WaitGroup
	lat := &latencies{}
	for i := range l.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch l.Mode {
			case loadStream:
				streamLoad(l.Addr, &counting, &stop, &bytes, &errs)
			case loadConnect:
				connectLoad(l.Addr, &counting, &stop, &ops, &errs)
			case loadUDP:
				udpLoad(l.Addr, &counting, &stop, &ops, &bytes, &errs)
			case loadPingPong:
				exchanges(l.Addr, 0, 0, &counting, &stop, &ops, &errs, nil)
			case loadLatency:
				// Each connection's share of the rate, its first exchange
				// offset so that the connections do not send at once.
				every := time.Duration(float64(time.Second) * float64(l.Conns) / l.Rate)
				exchanges(l.Addr, every, every*time.Duration(i)/time.Duration(l.Conns), &counting, &stop, &ops, &errs, lat)
			}
		}()
	}
	time.Sleep(l.Warmup)
	counting.Store(true)
	start := time.Now()
	time.Sleep(l.Duration)
	stop.Store(true)
	elapsed := time.Since(start)
	wg.Wait()
	r := result{Bytes: bytes.Load(), Ops: ops.Load(), Errors: errs.Load(), Seconds: elapsed.Seconds()}
	r.P50, r.P99 = lat.percentile(0.50), lat.percentile(0.99)
	return json.NewEncoder(os.Stdout).Encode(r)
}

// streamLoad reads what a backend streams through one long connection.
func streamLoad(addr string, counting, stop *atomic.Bool, bytes, errs *atomic.Int64) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		errs.Add(1)
		return
	}
	defer c.Close()
	if _, err := c.Write([]byte{modeStream}); err != nil {
		errs.Add(1)
		return
	}
	buf := make([]byte, 256<<10)
	for !stop.Load() {
		n, err := c.Read(buf)
		if counting.Load() && !stop.Load() {
			bytes.Add(int64(n))
		}
		if err != nil {
			errs.Add(1)
			return
		}
	}
}

// exchanges sends 64-byte messages on one long connection and waits for
// each echo: back to back when every is 0, else one every `every` from
// offset on, each timed from when it was due (into lat).
func exchanges(addr string, every, offset time.Duration, counting, stop *atomic.Bool, ops, errs *atomic.Int64, lat *latencies) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		errs.Add(1)
		return
	}
	defer c.Close()
	if _, err := c.Write([]byte{modeEcho}); err != nil {
		errs.Add(1)
		return
	}
	msg := []byte(strings.Repeat("p", 64))
	buf := make([]byte, len(msg))
	due := time.Now().Add(offset)
	for !stop.Load() {
		if every > 0 {
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
		} else {
			due = time.Now()
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, err := c.Write(msg)
		if err == nil {
			_, err = io.ReadFull(c, buf)
		}
		took := time.Since(due)
		due = due.Add(every)
		if !counting.Load() || stop.Load() {
			continue
		}
		if err != nil {
			errs.Add(1)
			return
		}
		ops.Add(1)
		lat.add(took)
	}
}

// latencies collects exchange times; nil collects nothing.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// percentile is the q-th percentile in milliseconds (0 without samples).
func (l *latencies) percentile(q float64) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	return float64(s[min(int(q*float64(len(s))), len(s)-1)]) / float64(time.Millisecond)
}

// connectLoad opens connections one after the other: a 64-byte request
// echoed back, then the client closes.
func connectLoad(addr string, counting, stop *atomic.Bool, ops, errs *atomic.Int64) {
	req := append([]byte{modeEcho}, []byte(strings.Repeat("x", 63))...)
	resp := make([]byte, len(req)-1)
	for !stop.Load() {
		err := func() error {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err := c.Write(req); err != nil {
				return err
			}
			if _, err := io.ReadFull(c, resp); err != nil {
				return err
			}
			return nil
		}()
		if !counting.Load() || stop.Load() {
			continue
		}
		if err != nil {
			errs.Add(1)
			continue
		}
		ops.Add(1)
	}
}

// udpLoad sends 64-byte datagrams from one socket (one flow), each after
// the answer to the one before; a datagram unanswered within 200 ms is an
// error.
func udpLoad(addr string, counting, stop *atomic.Bool, ops, bytes, errs *atomic.Int64) {
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		errs.Add(1)
		return
	}
	c, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		errs.Add(1)
		return
	}
	defer c.Close()
	msg := []byte(strings.Repeat("u", 64))
	buf := make([]byte, 2048)
	for !stop.Load() {
		_, err := c.Write(msg)
		if err == nil {
			_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			_, err = c.Read(buf)
		}
		if !counting.Load() || stop.Load() {
			continue
		}
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			errs.Add(1)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil {
			errs.Add(1)
			continue
		}
		ops.Add(1)
		bytes.Add(int64(len(msg)))
	}
}
