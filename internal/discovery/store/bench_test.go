package store

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
)

// BenchmarkFanOut: 1,000 watchers while 10,000 endpoints across 100 pools
// change. One op is one endpoint's readiness flipping in one pool (a whole
// pool of 100 endpoints compared, recorded and sent), until every watcher
// has received it and taken its encoding. Custom metrics: the latency from
// the change to each watcher (p50, p99) and to the last of them (p99).
func BenchmarkFanOut(b *testing.B) {
	const watchers, pools, perPool = 1000, 100, 100
	st := New(Options{})
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

	// Each watcher keeps its own samples: no lock shared among watchers.
	const maxSamples = 2000
	var (
		delivered sync.WaitGroup
		stopped   sync.WaitGroup
		samples   = make([][]time.Duration, watchers)
	)
	for i := range watchers {
		w, _ := st.Watch(st.Revision())
		stopped.Add(1)
		go func() {
			defer stopped.Done()
			for {
				select {
				case e, ok := <-w.C():
					if !ok {
						return
					}
					_ = e.JSON()
					if len(samples[i]) < maxSamples {
						samples[i] = append(samples[i], time.Since(e.At))
					}
					delivered.Done()
				case <-w.CutOff():
					panic("a watcher was cut off")
				}
			}
		}()
		b.Cleanup(func() { w.Stop(); close(w.ch) })
	}
	var toAll []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for n := range b.N {
		p := &state[n%pools]
		e := &p.Clusters[n%2].Endpoints[(n/pools)%(perPool/2)]
		e.Ready, e.Serving = !e.Ready, !e.Ready
		delivered.Add(watchers)
		start := time.Now()
		st.Replace("bench", *p)
		delivered.Wait()
		toAll = append(toAll, time.Since(start))
	}
	b.StopTimer()
	var each []time.Duration
	for _, s := range samples {
		each = append(each, s...)
	}
	b.ReportMetric(float64(percentile(each, 0.50).Microseconds()), "p50-µs/watcher")
	b.ReportMetric(float64(percentile(each, 0.99).Microseconds()), "p99-µs/watcher")
	b.ReportMetric(float64(percentile(toAll, 0.99).Microseconds()), "p99-µs/all-watchers")
}

func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[int(q*float64(len(d)-1))]
}
