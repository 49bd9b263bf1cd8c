package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/fleetnet/fleetnet/internal/testkit"
)

// openLoopEnv makes this program the open-loop load generator: its value
// is the openLoop to run, in JSON; the result is printed on one line, in
// JSON. A process of its own, so that the edge's process spends CPU on
// the edge only.
const openLoopEnv = "FLEETNET_EDGEBENCH_OPENLOOP"

// benchCipher is the one TLS 1.3 cipher suite both proxies use: nginx is
// pinned to it; Go cannot be configured for TLS 1.3, but a Go server
// prefers it whenever the machine has AES instructions. The clients that
// can show what they negotiated (the open-loop generator, h2load, the
// checks before the rounds) refuse anything else.
const benchCipher = tls.TLS_AES_128_GCM_SHA256

// openLoop is a fixed request rate spread over keep-alive HTTP/1.1
// connections (wrk2's model): connection c of N sends its k-th request at
// start + c·N/rate/N + k·N/rate, or as soon as its previous answer is in
// when that is later, and each request's latency counts from its
// scheduled send, so a server that falls behind is charged for the
// requests it delayed (no coordinated omission).
type openLoop struct {
	URL         string  `json:"url"`
	Rate        float64 `json:"rate"`
	Connections int     `json:"connections"`
	// Warmup runs the same schedule before Duration, unmeasured.
	Warmup   time.Duration `json:"warmup"`
	Duration time.Duration `json:"duration"`
}

// openResult is what one open-loop run measured.
type openResult struct {
	// Sent is the requests scheduled in the measured window, Done those
	// answered 200 before the deadline.
	Sent, Done int64
	// All is every request answered 200, the warm-up's included: the
	// divisor of the proxies' CPU per request over the generator's run.
	All int64
	// Errors are failed requests (connection errors, non-200), left out
	// of the latencies.
	Errors int64
	// Unfinished are requests scheduled in the window but not answered
	// when the run gave up (openDrain after its end): they count in the
	// latencies with the time they had waited then, a lower bound.
	Unfinished int64
	// Percentiles of the latencies of Done and Unfinished.
	P50, P99, P999, Max time.Duration
}

// openDrain is how long a run waits after its window for the requests
// scheduled in it: a server that falls that far behind is overloaded, and
// its latencies are lower bounds.
const openDrain = time.Second

// sendTime is connection c's k-th scheduled send, from the start.
func (o openLoop) sendTime(c, k int) time.Duration {
	interval := float64(time.Second) * float64(o.Connections) / o.Rate
	return time.Duration(math.Round(interval * (float64(c)/float64(o.Connections) + float64(k))))
}

// serveOpenLoop is the generator's process: it runs the openLoop in its
// argument and prints the result.
func serveOpenLoop(arg string) error {
	var o openLoop
	if err := json.Unmarshal([]byte(arg), &o); err != nil {
		return err
	}
	r, err := o.run()
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// run sends the schedule and waits for its answers.
func (o openLoop) run() (openResult, error) {
	if o.Rate <= 0 || o.Connections < 1 || o.Duration <= 0 {
		return openResult{}, fmt.Errorf("open loop: need a rate, connections and a duration: %+v", o)
	}
	u, err := url.Parse(o.URL)
	if err != nil {
		return openResult{}, err
	}
	path := u.RequestURI()
	request := []byte("GET " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUser-Agent: edgebench-openloop\r\n\r\n")
	dial := func() (net.Conn, error) { return net.DialTimeout("tcp", u.Host, 5*time.Second) }
	if u.Scheme == "https" {
		dial = func() (net.Conn, error) {
			c, err := dialTLS(u.Host, "http/1.1")
			if err != nil {
				return nil, err // not a nil *tls.Conn in a non-nil net.Conn
			}
			return c, nil
		}
	}

	// Every connection's goroutine is running before the first send.
	start := time.Now().Add(50 * time.Millisecond)
	window := start.Add(o.Warmup)
	end := window.Add(o.Duration)
	deadline := end.Add(openDrain)
	conns := make([]connResult, o.Connections)
	var wg sync.WaitGroup
	for c := range conns {
		wg.Go(func() {
			conns[c] = o.connection(c, start, window, end, deadline, request, dial)
		})
	}
	wg.Wait()

	var r openResult
	var lat []time.Duration
	for _, c := range conns {
		if c.fatal != nil {
			return r, c.fatal
		}
		r.Sent += c.sent
		r.Done += c.done
		r.All += c.all
		r.Errors += c.errors
		r.Unfinished += c.unfinished
		lat = append(lat, c.latencies...)
	}
	slices.Sort(lat)
	r.P50, r.P99, r.P999 = percentile(lat, 50), percentile(lat, 99), percentile(lat, 99.9)
	if len(lat) > 0 {
		r.Max = lat[len(lat)-1]
	}
	return r, nil
}

type connResult struct {
	sent, done, all, errors, unfinished int64
	latencies                           []time.Duration
	// fatal stops the run: the target is not what it must be (a cipher).
	fatal error
}

// connection runs connection c's part of the schedule.
func (o openLoop) connection(c int, start, window, end, deadline time.Time, request []byte, dial func() (net.Conn, error)) connResult {
	var r connResult
	r.latencies = make([]time.Duration, 0, int(float64(o.Duration)/float64(time.Second)*o.Rate/float64(o.Connections))+1)
	var conn net.Conn
	var br *bufio.Reader
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	for k := 0; ; k++ {
		sched := start.Add(o.sendTime(c, k))
		if !sched.Before(end) {
			return r
		}
		measured := !sched.Before(window)
		if measured {
			r.sent++
		}
		if d := time.Until(sched); d > 0 {
			time.Sleep(d)
		}
		err := func() error {
			if time.Now().After(deadline) {
				return os.ErrDeadlineExceeded
			}
			if conn == nil {
				var err error
				if conn, err = dial(); err != nil {
					return err
				}
				if err := conn.SetDeadline(deadline); err != nil {
					return err
				}
				br = bufio.NewReaderSize(conn, 16<<10)
			}
			if _, err := conn.Write(request); err != nil {
				return err
			}
			status, keep, err := readResponse(br)
			if err != nil {
				return err
			}
			if !keep {
				_ = conn.Close()
				conn = nil
			}
			if status != 200 {
				return fmt.Errorf("status %d", status)
			}
			return nil
		}()
		took := time.Since(sched)
		switch {
		case err == nil:
			r.all++
			if measured {
				r.done++
				r.latencies = append(r.latencies, took)
			}
			continue
		case errors.As(err, new(cipherError)):
			r.fatal = err
			return r
		}
		if conn != nil {
			_ = conn.Close()
			conn = nil
		}
		if !time.Now().Before(deadline) {
			// Given up on: charged the wait it had when the run ended.
			if measured {
				r.unfinished++
				r.latencies = append(r.latencies, deadline.Sub(sched))
			}
			continue
		}
		if measured {
			r.errors++
		}
	}
}

// cipherError is a TLS connection that did not negotiate TLS 1.3 with
// benchCipher.
type cipherError struct{ state tls.ConnectionState }

func (e cipherError) Error() string {
	return fmt.Sprintf("negotiated %s with %s, want TLS 1.3 with %s",
		tls.VersionName(e.state.Version), tls.CipherSuiteName(e.state.CipherSuite), tls.CipherSuiteName(benchCipher))
}

// dialTLS connects by TLS, offering the ALPN protocol proto, and refuses
// a connection that is not TLS 1.3 with benchCipher (offering TLS 1.2
// too, so that a server without 1.3 is named as such).
func dialTLS(host, proto string) (*tls.Conn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", host, &tls.Config{
		InsecureSkipVerify: true, // the bench's own throwaway CA
		MinVersion:         tls.VersionTLS12,
		NextProtos:         []string{proto},
	})
	if err != nil {
		return nil, err
	}
	if st := conn.ConnectionState(); st.Version != tls.VersionTLS13 || st.CipherSuite != benchCipher {
		_ = conn.Close()
		return nil, cipherError{st}
	}
	return conn, nil
}

// readResponse reads one HTTP/1.x response whose body has a
// Content-Length (the backends' answers have one, and both proxies keep
// it), and says whether the connection may carry another request.
func readResponse(r *bufio.Reader) (status int, keep bool, err error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, false, err
	}
	// HTTP/1.1 200 OK
	proto, rest, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(" "))
	code, _, _ := bytes.Cut(rest, []byte(" "))
	if status, err = strconv.Atoi(string(code)); err != nil || !bytes.HasPrefix(proto, []byte("HTTP/1.")) {
		return 0, false, fmt.Errorf("malformed status line %q", line)
	}
	keep = string(proto) == "HTTP/1.1"
	length := -1
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return 0, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, false, fmt.Errorf("malformed header %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, false, fmt.Errorf("malformed Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, false, fmt.Errorf("Transfer-Encoding %q: only answers with a Content-Length are read", value)
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(value, []byte("close")) {
				keep = false
			} else if bytes.EqualFold(value, []byte("keep-alive")) {
				keep = true
			}
		}
	}
	if length < 0 {
		return 0, false, errors.New("an answer without a Content-Length")
	}
	if _, err := r.Discard(length); err != nil {
		return 0, false, err
	}
	return status, keep, nil
}

// percentile is the nearest-rank percentile p (0 < p <= 100) of sorted
// values: the smallest value that at least p % of them do not exceed.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// Less a hair, so that 99.9 % of 1,000 is rank 999 in floating point too.
	rank := int(math.Ceil(p*float64(len(sorted))/100 - 1e-9))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// runOpenLoop runs the generator in a child process and reads its result.
func runOpenLoop(ctx context.Context, o openLoop) (openResult, error) {
	arg, err := json.Marshal(o)
	if err != nil {
		return openResult{}, err
	}
	self, err := os.Executable()
	if err != nil {
		return openResult{}, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), openLoopEnv+"="+string(arg))
	cmd.SysProcAttr = testkit.ChildAttr()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return openResult{}, fmt.Errorf("open loop on %s: %w: %s", o.URL, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var r openResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return r, fmt.Errorf("open loop on %s: %w: %q", o.URL, err, stdout.String())
	}
	return r, nil
}
