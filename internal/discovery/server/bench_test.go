package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/internal/discovery/server"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
)

// syncedBackend is a pool source that has everything from the start.
type syncedBackend struct{}

var synced = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (syncedBackend) Routers() []discoveryv1.Router { return nil }
func (syncedBackend) Synced() <-chan struct{}       { return synced }
func (syncedBackend) Status() string                { return "synced" }

// BenchmarkWatchLoopback: 1,000 watchers on loopback HTTP while 10,000
// endpoints across 100 pools change, the benchmark. One op is one
// endpoint's readiness flipping in one pool (an event of ~100 endpoints,
// ~15 kB), until every watcher has read its line. The watchers run in the
// same process (the machine has 2 cores for both), each on its own
// connection, and only find the revision in each line: what they cost is
// small beside the server's work, but cpu-ms/op counts both. Plain HTTP, so
// that the number is the server's and not TLS's. Custom metrics: latency
// from the change to each watcher (p50, p99) and to the last (p99), CPU of
// the process per change, and the heap with 1,000 watchers open.
func BenchmarkWatchLoopback(b *testing.B) {
	const watchers, pools, perPool = 1000, 100, 100
	st := store.New(store.Options{})
	srv := server.New(server.Config{
		Store: st, Backend: syncedBackend{}, SourceName: "bench",
		Auth: &server.Authenticator{Tokens: map[string]server.Identity{"bench-token-0123456789": {Name: "bench", Role: server.RoleRead, Via: "token"}}},
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	hs := httptest.NewServer(srv.Handler())
	b.Cleanup(func() { srv.Stop(); hs.Close() })

	state := make([]discoveryv1.Pool, pools)
	for i := range state {
		p := discoveryv1.Pool{Namespace: "bench", Name: fmt.Sprintf("pool-%03d", i), Labels: map[string]string{"app": "model"}}
		for c, region := range []string{"eu-west-1", "us-east-1"} {
			pc := discoveryv1.PoolCluster{Cluster: fmt.Sprintf("cluster-%d", c), Region: region}
			for e := range perPool / 2 {
				pc.Endpoints = append(pc.Endpoints, discoveryv1.Endpoint{
					InstanceID: fmt.Sprintf("server-%d-%03d", c, e), Addresses: []string{fmt.Sprintf("10.%d.%d.%d", c, i, e)},
					Ports: []discoveryv1.Port{{Name: "http", Port: 8080, Protocol: "TCP"}}, Ready: true, Serving: true, Zone: region + "a",
				})
			}
			p.Clusters = append(p.Clusters, pc)
		}
		state[i] = p
		st.Replace("bench", p)
	}
	start := st.Revision()
	// changedAt[r-start-1] is when revision r was made, in Unix nanoseconds.
	changedAt := make([]atomic.Int64, b.N)

	transport := &http.Transport{MaxIdleConnsPerHost: watchers}
	b.Cleanup(transport.CloseIdleConnections)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	const maxSamples = 500
	var (
		connected, delivered sync.WaitGroup
		samples              = make([][]time.Duration, watchers)
		failed               atomic.Value
	)
	connected.Add(watchers)
	for i := range watchers {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+"/v1/watch?revision="+strconv.FormatInt(start, 10), nil)
			req.Header.Set("Authorization", "Bearer bench-token-0123456789")
			resp, err := transport.RoundTrip(req)
			if err != nil {
				failed.Store(err)
				connected.Done()
				return
			}
			defer resp.Body.Close()
			connected.Done()
			r := bufio.NewReaderSize(resp.Body, 4<<10)
			for {
				line, err := r.ReadSlice('\n')
				// The revision is near the start of the line: take it before
				// the rest of a long line overwrites the buffer.
				rev := revisionOf(line)
				for err == bufio.ErrBufferFull {
					_, err = r.ReadSlice('\n')
				}
				if err != nil {
					return
				}
				if n := rev - start - 1; n >= 0 && n < int64(len(changedAt)) {
					if len(samples[i]) < maxSamples {
						samples[i] = append(samples[i], time.Duration(time.Now().UnixNano()-changedAt[n].Load()))
					}
					delivered.Done()
				}
			}
		}()
	}
	connected.Wait()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	// Every watcher is subscribed once the store counts it.
	for st.Stats().Watchers < watchers {
		time.Sleep(time.Millisecond)
	}
	runtime.GC()
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	cpu0 := cpuTime()

	var toAll []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for n := range b.N {
		p := &state[n%pools]
		e := &p.Clusters[n%2].Endpoints[(n/pools)%(perPool/2)]
		e.Ready, e.Serving = !e.Ready, !e.Ready
		delivered.Add(watchers)
		t0 := time.Now()
		changedAt[n].Store(t0.UnixNano())
		st.Replace("bench", *p)
		delivered.Wait()
		toAll = append(toAll, time.Since(t0))
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	if cut := st.Stats().CutOffs; cut > 0 {
		b.Fatalf("%d watchers were cut off", cut)
	}
	var each []time.Duration
	for _, s := range samples {
		each = append(each, s...)
	}
	b.ReportMetric(float64(pct(each, 0.50).Microseconds()), "p50-µs/watcher")
	b.ReportMetric(float64(pct(each, 0.99).Microseconds()), "p99-µs/watcher")
	b.ReportMetric(float64(pct(toAll, 0.99).Microseconds()), "p99-µs/all-watchers")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(mem.HeapInuse)/(1<<20), "heap-MiB")
}

// revisionOf finds the event's "revision":N, the first in the line,
// without decoding it.
func revisionOf(line []byte) int64 {
	_, after, ok := bytes.Cut(line, []byte(`"revision":`))
	if !ok {
		return -1
	}
	end := bytes.IndexAny(after, ",}")
	if end < 0 {
		return -1
	}
	n, _ := strconv.ParseInt(string(after[:end]), 10, 64)
	return n
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func pct(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[int(q*float64(len(d)-1))]
}
