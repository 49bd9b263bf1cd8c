package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// histogram counts latencies in microsecond buckets up to maxLatency; the
// last bucket holds everything slower.
type histogram struct {
	buckets []uint64
	count   uint64
}

const maxLatency = 100 * time.Millisecond

func newHistogram() histogram {
	return histogram{buckets: make([]uint64, maxLatency/time.Microsecond+1)}
}

func (h *histogram) add(d time.Duration) {
	i := min(int(d/time.Microsecond), len(h.buckets)-1)
	h.buckets[i]++
	h.count++
}

func (h *histogram) merge(o histogram) {
	for i, n := range o.buckets {
		h.buckets[i] += n
	}
	h.count += o.count
}

// percentile returns the smallest bucket bound below which a fraction p of
// the latencies fall (the upper end of the bucket: never optimistic).
func (h *histogram) percentile(p float64) time.Duration {
	if h.count == 0 {
		return 0
	}
	want := uint64(p*float64(h.count) + 0.5)
	if want == 0 {
		want = 1
	}
	var seen uint64
	for i, n := range h.buckets {
		if seen += n; seen >= want {
			if i == len(h.buckets)-1 {
				break // the overflow bucket: at least maxLatency
			}
			return time.Duration(i+1) * time.Microsecond
		}
	}
	return maxLatency
}

// loadResult is one load run.
type loadResult struct {
	queries  uint64 // answered
	errors   uint64 // answered, but not NOERROR with exactly one answer
	timeouts uint64
	elapsed  time.Duration
	hist     histogram
}

func (r loadResult) qps() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.queries) / r.elapsed.Seconds()
}

// packQueries packs an A query (recursion desired, as stub resolvers send)
// for each name; workers only rewrite the ID.
func packQueries(names []string) ([][]byte, error) {
	out := make([][]byte, len(names))
	for i, n := range names {
		m := new(dns.Msg)
		m.SetQuestion(n, dns.TypeA)
		b, err := m.Pack()
		if err != nil {
			return nil, fmt.Errorf("packing a query for %s: %w", n, err)
		}
		out[i] = b
	}
	return out, nil
}

// load sends queries for random names from concurrency UDP sockets, each
// waiting for its answer before the next question (a closed loop: the
// rate is what the server sustains), for d.
func load(ctx context.Context, addr string, queries [][]byte, concurrency int, d time.Duration) (loadResult, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	results := make([]loadResult, concurrency)
	errs := make([]error, concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range concurrency {
		wg.Go(func() { results[w], errs[w] = worker(ctx, addr, queries, uint64(w)) })
	}
	wg.Wait()
	total := loadResult{elapsed: time.Since(start), hist: newHistogram()}
	for _, r := range results {
		total.queries += r.queries
		total.errors += r.errors
		total.timeouts += r.timeouts
		total.hist.merge(r.hist)
	}
	return total, errors.Join(errs...)
}

// queryTimeout is how long a worker waits for an answer before counting a
// timeout and asking the next question.
const queryTimeout = time.Second

func worker(ctx context.Context, addr string, queries [][]byte, seed uint64) (loadResult, error) {
	r := loadResult{hist: newHistogram()}
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return r, err
	}
	defer conn.Close()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	buf := make([]byte, 1232)
	q := make([]byte, 512)
	id := uint16(rng.Uint32())
	for ctx.Err() == nil {
		src := queries[rng.IntN(len(queries))]
		q = append(q[:0], src...)
		id++
		binary.BigEndian.PutUint16(q, id)
		t0 := time.Now()
		if _, err := conn.Write(q); err != nil {
			return r, fmt.Errorf("sending to %s: %w", addr, err)
		}
		if err := conn.SetReadDeadline(t0.Add(queryTimeout)); err != nil {
			return r, err
		}
		for {
			n, err := conn.Read(buf)
			if err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					r.timeouts++
					break
				}
				return r, fmt.Errorf("reading from %s: %w", addr, err)
			}
			if n < 12 || binary.BigEndian.Uint16(buf) != id {
				continue // a late answer to a question that timed out
			}
			r.hist.add(time.Since(t0))
			r.queries++
			// The header alone says whether the answer is right: rcode
			// NOERROR and one A record, without unpacking the message,
			// which would cost the load generator the CPU it shares with
			// the server.
			if rcode, ancount := buf[3]&0x0f, binary.BigEndian.Uint16(buf[6:]); rcode != dns.RcodeSuccess || ancount != 1 {
				r.errors++
			}
			break
		}
	}
	return r, nil
}
