package main

import (
	"testing"
	"time"
)

// h2loadReport is h2load 1.52's report of a run against an nginx that
// closed its connections after 1,000 requests (keepalive_requests' default,
// which the bench's nginx raises).
const h2loadReport = `starting benchmark...
spawning thread #0: 4 total client(s). Timing-based test with 0s of warm-up time and 2s of main duration for measurements.
spawning thread #1: 4 total client(s). Timing-based test with 0s of warm-up time and 2s of main duration for measurements.
Warm-up started for thread #0.
Warm-up started for thread #1.
progress: 25% of clients started
progress: 100% of clients started
Warm-up phase is over for thread #0.
Main benchmark duration is started for thread #0.
Warm-up phase is over for thread #1.
Main benchmark duration is started for thread #1.
TLS Protocol: TLSv1.3
Cipher: TLS_AES_128_GCM_SHA256
Server Temp Key: X25519 253 bits
Application protocol: h2
Process Request Failure:1
Main benchmark duration is over for thread #1. Stopping all clients.
Stopped all clients for thread #1
Main benchmark duration is over for thread #0. Stopping all clients.
Stopped all clients for thread #0

finished in 2.01s, 4000.00 req/s, 281.51KB/s
requests: 8037 total, 8072 started, 8037 done, 8000 succeeded, 37 failed, 37 errored, 0 timeout
status codes: 8000 2xx, 0 3xx, 0 4xx, 0 5xx
traffic: 563.02KB (576528) total, 375.00KB (384000) headers (space savings 51.02%), 46.88KB (48000) data
                     min         max         mean         sd        +/- sd
time for request:       48us      6.32ms       984us      1.11ms    83.43%
time for connect:     8.11ms     17.44ms     11.09ms      3.02ms    87.50%
time to 1st byte:    10.70ms     18.48ms     14.54ms      2.51ms    75.00%
req/s           :    7083.41     8380.14     7613.92      520.96    75.00%
`

func TestParseH2load(t *testing.T) {
	got, err := parseH2load(h2loadReport)
	if err != nil {
		t.Fatal(err)
	}
	want := h2Result{RPS: 4000, Requests: 8000, Errors: 37, Mean: 984 * time.Microsecond,
		TLSVersion: "TLSv1.3", Cipher: "TLS_AES_128_GCM_SHA256", Protocol: "h2"}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if _, err := parseH2load("starting benchmark...\n"); err == nil {
		t.Fatal("a report without results parsed")
	}
}
