package main

import (
	"testing"
	"time"
)

const wrkReport = `Running 10s test @ http://127.0.0.1:8080/
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.10ms  620.45us  21.80ms   88.10%
    Req/Sec    29.50k     1.96k   33.80k    71.00%
  Latency Distribution
     50%  812.00us
     75%    1.23ms
     90%    1.90ms
     99%    3.41ms
  587123 requests in 10.01s, 98.12MB read
  Non-2xx or 3xx responses: 3
  Socket errors: connect 0, read 2, write 0, timeout 1
Requests/sec:  58654.32
Transfer/sec:      9.80MB
`

func TestParseWrk(t *testing.T) {
	got, err := parseWrk(wrkReport)
	if err != nil {
		t.Fatal(err)
	}
	want := result{RPS: 58654.32, P50: 812 * time.Microsecond, P99: 3410 * time.Microsecond, Requests: 587123, Errors: 6}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if _, err := parseWrk("Running 10s test\n"); err == nil {
		t.Fatal("a report without results parsed")
	}
	for in, want := range map[string]time.Duration{"2.01s": 2010 * time.Millisecond, "1.50m": 90 * time.Second, "7.00us": 7 * time.Microsecond} {
		if got, err := parseWrkDuration(in); err != nil || got != want {
			t.Errorf("%s: got %v, %v, want %v", in, got, err, want)
		}
	}
}
